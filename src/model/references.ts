/**
 * References: `@point` fields of an entity type whose keys all come from the entity's own stored fields (the
 * guide's "Modelling relationships"). Where one points, from an entity's values; the write path checks that it
 * points at something (src/write/references.ts), many-to-many connections follow it (`@range(through)`).
 */
import { renderKey } from './key-template';
import type { PointPath } from './types';
import type { EntityAddress } from '../storage/types';

type Values = Record<string, unknown>;

/** The stored fields that give a reference's keys. */
export function referenceFields(path: PointPath): string[] {
  return [...(path.tableTemplate?.bindings.values() ?? []), ...path.partitionKey.bindings.values(), ...path.rowKey.bindings.values()].map((b) => b.name);
}

/**
 * The address a reference of an entity with `values` points at; null when an optional reference's key field is
 * null (it points at nothing).
 * @throws TablegraphError BAD_USER_INPUT when a value cannot form the key (from renderKey)
 */
export function referenceAddress(path: PointPath, values: Values): EntityAddress | null {
  const rendered: Record<'table' | 'partitionKey' | 'rowKey', string> = { table: path.table, partitionKey: '', rowKey: '' };
  for (const which of ['table', 'partitionKey', 'rowKey'] as const) {
    const bound = which === 'table' ? path.tableTemplate : path[which];
    if (!bound) continue;
    const args: Values = {};
    for (const [placeholder, b] of bound.bindings) {
      const value = values[b.name];
      if (value === null || value === undefined) return null;
      args[placeholder] = value;
    }
    rendered[which] = renderKey(bound.template, args);
  }
  return rendered;
}
