/**
 * References: `@point` fields of an entity type whose keys all come from the entity's own stored fields (the
 * guide's "Modelling relationships"). Where one points, from an entity's values; the write path checks that it
 * points at something (src/write/check-references.ts), many-to-many connections follow it (`@range(through)`).
 *
 * A reference either gives its target's own keys (an order's `region` and `customerId` for a customer stored by
 * region), or looks its target up through a unique index of the target (`@point(index: "byId")`, the guide's "Index
 * Entities Pattern"): then the entity holds only what the index is keyed by (the `customerId`), its address is the
 * index entity's, and the index entity holds the target's keys — one more point query, and nothing to change on the
 * referring entities when the target moves.
 */
import { primaryAddress } from './entity-codec';
import { renderKey } from './key-template';
import { ENTITY_TYPE_PROPERTY, type PointPath } from './types';
import type { EntityAddress, StoredEntity } from '../storage/storage-types';

type Values = Record<string, unknown>;

/**
 * Entities a delete lists per `onDelete: RESTRICT` reference to find one pointing at it (one range query's page): one
 * is all a refusal needs (src/write/group-read.ts). Read through an index, each listed is read too (a point query),
 * until one points at the entity: demand control counts them (src/read/demand.ts).
 */
export const REFERRERS_LISTED = 10;

/** The stored fields that give a reference's keys. */
export function referenceFields(path: PointPath): string[] {
  return [...(path.tableTemplate?.bindings.values() ?? []), ...path.partitionKey.bindings.values(), ...path.rowKey.bindings.values()].map((b) => b.name);
}

/**
 * The address a reference of an entity with `values` points at — through a unique index, the index entity's;
 * null when an optional reference's key field is null (it points at nothing).
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

/** The EntityType stored at a reference's address when it points at something: the target's, or its index's. */
export function referencedType(path: PointPath): string {
  return path.index ? path.index.entityType : path.target.entityType;
}

/**
 * The target's own address, given what was read at a reference's address: that address itself for a reference by
 * keys; through a unique index, the address the index entity's copy of the target's keys gives.
 * @returns null when nothing of the expected type is stored there (the reference points at nothing)
 */
export function targetAddress(path: PointPath, at: EntityAddress, read: StoredEntity | null): EntityAddress | null {
  if (!read || read.properties[ENTITY_TYPE_PROPERTY] !== referencedType(path)) return null;
  return path.index ? primaryAddress(path.target, read.properties) : at;
}

/**
 * Reads the entity a reference of an entity with `values` points at: one point query (`get`), or through a unique
 * index two in turn — the index entity, then the entity its keys give.
 * @param get reads one address (null: nothing there); `step` says whether it is the index entity or the target
 * @returns the target as stored, or null when the reference is null or points at nothing of the target's type
 * @throws TablegraphError BAD_USER_INPUT when a value cannot form the key; what `get` throws
 */
export async function readReferenced(
  path: PointPath,
  values: Values,
  get: (a: EntityAddress, step: 'index' | 'target') => Promise<StoredEntity | null>,
): Promise<StoredEntity | null> {
  const at = referenceAddress(path, values);
  if (!at) return null;
  const first = await get(at, path.index ? 'index' : 'target');
  const address = targetAddress(path, at, first);
  if (!address) return null;
  const target = path.index ? await get(address, 'target') : first;
  return target && target.properties[ENTITY_TYPE_PROPERTY] === path.target.entityType ? target : null;
}
