/**
 * Compiles the Subscription type's `@subscribe` fields (src/model/change-log.ts): which entity type each follows,
 * in one partition (every PartitionKey field an argument) or one entity (every RowKey field too), and the argument
 * a client resumes with (`after: String`). A Subscription field without `@subscribe` is refused: tablegraph would
 * not know what it reports.
 */
import { getNamedType, isNonNullType, isScalarType, type GraphQLSchema } from 'graphql';
import type { EntityModel, SubscriptionModel } from '../model/types';
import type { SchemaProblems } from './schema-errors';

import { TENANT_FIELD } from '../model/tenancy';

/** The argument a subscription resumes with. */
export const AFTER_ARGUMENT = 'after';

/** The type a subscription of `entity` returns (generated-sdl.ts). */
export function changeTypeName(entity: string): string {
  return `${entity}Change`;
}

/** The PartitionKey's fields a subscription's arguments give: a tenant-scoped partition's tenant is the token's (@tenancy). */
function argumentFields(entity: EntityModel): string[] {
  return entity.layout.partitionKey.fields.filter((f) => f !== TENANT_FIELD);
}

/** Every `@subscribe` field, by `Subscription.field`; a problem for each that cannot be served. */
export function buildSubscriptions(schema: GraphQLSchema, entities: Map<string, EntityModel>, problems: SchemaProblems): Map<string, SubscriptionModel> {
  const out = new Map<string, SubscriptionModel>();
  const subscription = schema.getSubscriptionType();
  const def = schema.getDirective('subscribe');
  if (!subscription) return out;
  for (const field of Object.values(subscription.getFields())) {
    const coordinate = `${subscription.name}.${field.name}`;
    const d = field.astNode?.directives?.find((x) => x.name.value === 'subscribe');
    if (!d || !def) {
      problems.add(coordinate, 'has no @subscribe: tablegraph does not know which writes it reports', field.astNode);
      continue;
    }
    const name = (d.arguments?.find((a) => a.name.value === 'entity')?.value as { value?: string } | undefined)?.value ?? '';
    const entity = entities.get(name);
    if (!entity) {
      problems.add(coordinate, `@subscribe(entity: "${name}"): no @entity type of that name`, d);
      continue;
    }
    if (entity.layout.tableTemplate) {
      problems.add(coordinate, `@subscribe: ${name} is stored in a table per period, which a subscription cannot follow`, d);
      continue;
    }
    if (entity.wide) {
      problems.add(coordinate, `@subscribe: ${name} is a wide entity (stored as several entities), which a subscription cannot follow`, d);
      continue;
    }
    if (getNamedType(field.type).name !== changeTypeName(name)) {
      problems.add(coordinate, `@subscribe(entity: "${name}") returns ${changeTypeName(name)} (generated), not ${String(field.type)}`, field.astNode);
      continue;
    }
    const args = new Map(field.args.map((a) => [a.name, a]));
    const partitionFields = argumentFields(entity);
    const rowFields = entity.layout.rowKey.fields;
    const missing = partitionFields.filter((f) => !args.has(f));
    if (missing.length > 0) {
      problems.add(
        coordinate,
        `@subscribe follows one partition of ${name}: add the argument(s) ${missing.join(', ')} (its PartitionKey's fields)`,
        field.astNode,
      );
      continue;
    }
    const givenRow = rowFields.filter((f) => args.has(f) && !partitionFields.includes(f));
    const oneEntity = rowFields.every((f) => args.has(f));
    if (givenRow.length > 0 && !oneEntity) {
      const absent = rowFields.filter((f) => !args.has(f));
      problems.add(
        coordinate,
        `@subscribe follows a partition or one entity: give all of the RowKey's fields (${absent.join(', ')} missing) or none`,
        field.astNode,
      );
      continue;
    }
    let bad = false;
    for (const a of field.args) {
      const isKey = partitionFields.includes(a.name) || rowFields.includes(a.name);
      if (a.name === AFTER_ARGUMENT && !isKey) {
        if (isNonNullType(a.type) || getNamedType(a.type).name !== 'String') {
          problems.add(`${coordinate}(${a.name}:)`, 'the resume argument is `after: String` (a cursor, optional)', a.astNode);
          bad = true;
        }
      } else if (!isKey) {
        problems.add(`${coordinate}(${a.name}:)`, `is neither a key field of ${name} nor \`after\`: a subscription is a partition or an entity`, a.astNode);
        bad = true;
      } else if (!isNonNullType(a.type) || !isScalarType(getNamedType(a.type))) {
        problems.add(`${coordinate}(${a.name}:)`, 'a key argument is a non-null scalar', a.astNode);
        bad = true;
      }
    }
    if (bad) continue;
    out.set(coordinate, {
      coordinate,
      entity,
      oneEntity,
      ...(args.has(AFTER_ARGUMENT) && !rowFields.includes(AFTER_ARGUMENT) ? { after: AFTER_ARGUMENT } : {}),
      node: d,
    });
  }
  return out;
}
