/**
 * The point query of an entity at the address its own key values give — a federation `@key`'s (federation.ts), a
 * Relay global id's (node-interface.ts): every placeholder of the layout bound to an argument of the field it names,
 * the tenant's to the request's token.
 */
import type { KeyTemplate } from '../model/key-template';
import { TENANT_FIELD } from '../model/tenancy';
import type { BoundTemplate, EntityModel, IndexModel, Layout, PointPath } from '../model/types';

/** Every placeholder bound to the argument of the field it names (the tenant's to the request's). */
function bound(template: KeyTemplate): BoundTemplate {
  const bindings = new Map(
    template.fields.map((f) => [f, f === TENANT_FIELD ? ({ source: 'tenant', name: TENANT_FIELD } as const) : ({ source: 'argument', name: f } as const)]),
  );
  return { template, bindings };
}

/**
 * @param entity the entity type read
 * @param layout its own layout, or the layout of `index` (a unique index whose keys are the values given)
 * @param at where the path is reported from: its coordinate (e.g. `Book.@key`), parent type and field name
 * @returns a point path whose arguments are the layout's fields, by name
 */
export function ownKeyPath(
  entity: EntityModel,
  layout: Layout,
  at: { coordinate: string; parentType: string; fieldName: string },
  index?: IndexModel,
): PointPath {
  return {
    kind: 'point',
    ...at,
    target: entity,
    ...(index && { index }),
    table: layout.table,
    ...(layout.tableTemplate && { tableTemplate: bound(layout.tableTemplate) }),
    partitionKey: bound(layout.partitionKey),
    rowKey: bound(layout.rowKey),
    checkOnWrite: false,
  };
}
