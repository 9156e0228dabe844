/**
 * Compiles stored interfaces (the guide's "Inheritance relationships"): implementations sharing one table and one
 * layout. Telling them apart at run time is src/model/inheritance.ts.
 */
import { isInterfaceType, isObjectType, type GraphQLSchema } from 'graphql';
import type { SchemaProblems } from './schema-errors';
import { NODE_INTERFACE, nodeIdField } from './node-interface';
import type { EntityModel, StoredField } from '../model/types';

/**
 * The stored interfaces, by name: each an abstract EntityModel whose `implementations` are the concrete types, with
 * their layout and key fields and the stored fields they all have (same name, type and nullability). An interface
 * none of whose implementations is an entity type is a plain GraphQL interface and left out; one whose
 * implementations are stored apart, or not all stored, is a problem.
 */
export function buildInterfaces(schema: GraphQLSchema, entities: Map<string, EntityModel>, problems: SchemaProblems): Map<string, EntityModel> {
  const interfaces = new Map<string, EntityModel>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isInterfaceType(type) || type.name.startsWith('__') || (type.name === NODE_INTERFACE && nodeIdField(schema))) continue;
    const objects = schema.getPossibleTypes(type).filter(isObjectType);
    const stored = objects.map((o) => entities.get(o.name)).filter((e): e is EntityModel => e !== undefined);
    if (stored.length === 0) continue;
    const why = layoutProblem(
      objects.map((o) => o.name),
      stored,
    );
    if (why) {
      problems.add(
        type.name,
        `${why}: a field returning ${type.name} must be served by one point or range query, so its implementations share one table and key templates and differ by their EntityType (the guide's "Inheritance relationships")`,
        type.astNode,
      );
      continue;
    }
    const [first] = stored;
    const fields = new Map([...first.fields].filter(([name, f]) => stored.every((e) => sameField(e.fields.get(name), f))));
    interfaces.set(type.name, {
      name: type.name,
      entityType: type.name, // never stored: each entity carries its concrete type's
      layout: first.layout,
      fields,
      keyFields: first.keyFields,
      indexes: new Map(),
      exposesEtag: stored.every((e) => e.exposesEtag),
      summaryFields: new Set(),
      copies: new Map(),
      authFields: new Set(stored.flatMap((e) => [...e.authFields])),
      implementations: stored,
      // One layout for all: under @tenancy they are all tenant-scoped or all @global (their PartitionKeys differ otherwise).
      ...(first.tenantScoped && { tenantScoped: true as const }),
      node: type.astNode ?? undefined,
    });
  }
  return interfaces;
}

function layoutProblem(names: string[], stored: EntityModel[]): string | undefined {
  const missing = names.filter((n) => !stored.some((e) => e.name === n));
  if (missing.length > 0) return `${missing.join(', ')} ${missing.length > 1 ? 'have' : 'has'} no @entity`;
  const [first, ...rest] = stored;
  const source = (e: EntityModel) => `table ${e.layout.table}, PartitionKey "${e.layout.partitionKey.source}", RowKey "${e.layout.rowKey.source}"`;
  const apart = rest.find((e) => source(e) !== source(first));
  if (apart) return `${first.name} is stored in ${source(first)} but ${apart.name} in ${source(apart)}`;
  const types = stored.map((e) => e.entityType);
  const twice = types.find((t, i) => types.indexOf(t) !== i);
  if (twice !== undefined) return `two implementations store the EntityType "${twice}"`;
  return undefined;
}

function sameField(a: StoredField | undefined, b: StoredField): boolean {
  return (
    a !== undefined &&
    a.graphqlType === b.graphqlType &&
    a.nonNull === b.nonNull &&
    !a.series === !b.series &&
    !a.list === !b.list &&
    !a.encrypted === !b.encrypted
  );
}
