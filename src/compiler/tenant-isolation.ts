/**
 * Tenancy (`extend schema @tenancy`, `@global`; src/model/tenancy.ts): reads the directive, and proves that no access
 * path, write, derived path or subscription of a tenant-scoped type can reach another tenant — or refuses the schema
 * with each reason located. Key templates carry the tenant by construction (layouts.ts puts `{_tenant}_` first in every
 * tenant-scoped PartitionKey, field-bindings.ts binds it to the token or to the parent's own); this pass checks that
 * construction held everywhere and refuses what it cannot make safe:
 * - a table shared by a tenant-scoped and a `@global` layout (a global PartitionKey could equal a tenant's);
 * - a summary, copy or move between a tenant-scoped and a `@global` type (every tenant's writes would meet in one
 *   entity, or one write would reach every tenant's);
 * - a reference from a tenant-scoped type to a `@global` one that a delete of the global entity must see to (it would
 *   have to find referrers in every tenant);
 * - an argument named `_tenant` (the tenant is never an argument).
 */
import { isObjectType, type ASTNode, type GraphQLSchema } from 'graphql';
import type { AccessPath, BoundTemplate, EntityModel, Model, TenancyModel } from '../model/types';
import { hasTenantTableTemplates, startsWithTenant, TENANT_FIELD, TENANT_TABLE_KEY_LENGTH, tenantTables } from '../model/tenancy';
import { readGlobal, readTenancy } from './directives';
import type { SchemaProblems } from './schema-errors';

/** The schema's `@tenancy`, or undefined; problems for a tier not built, a second `@tenancy`, a stray `@global`. */
export function buildTenancy(schema: GraphQLSchema, problems: SchemaProblems): TenancyModel | undefined {
  const { first, more } = readTenancy(schema);
  for (const node of more) problems.add('schema', '@tenancy is given more than once: a schema has one tenancy', node);
  if (!first) {
    for (const type of Object.values(schema.getTypeMap())) {
      const global = isObjectType(type) ? readGlobal(type.astNode) : undefined;
      if (global)
        problems.add(
          type.name,
          '@global marks a type every tenant shares, and the schema has no @tenancy: remove it, or add `extend schema @tenancy(claim: "tid")`',
          global,
        );
    }
    return undefined;
  }
  if (first.claim === '') problems.add('schema', '@tenancy(claim:) names the token claim that holds the tenant id, e.g. "tid"', first.node);
  for (const type of Object.values(schema.getTypeMap())) {
    const global = isObjectType(type) ? readGlobal(type.astNode) : undefined;
    if (global && !type.astNode?.directives?.some((d) => d.name.value === 'entity')) {
      problems.add(type.name, '@global is for @entity types: only stored types belong to a tenant or to none', global);
    }
  }
  return { claim: first.claim, isolation: first.isolation, node: first.node };
}

/**
 * A default tier other than PARTITION_PREFIX needs tables a tenant can have its own of: no table per period (their
 * names are made per write), and names that stay within 63 characters with a tenant's suffix (tenantTable).
 */
function checkTiers(model: Model, problems: SchemaProblems): void {
  const tenancy = model.tenancy!;
  if (tenancy.isolation === 'PARTITION_PREFIX') return;
  if (hasTenantTableTemplates(model)) {
    problems.add(
      'schema',
      `@tenancy(isolation: ${tenancy.isolation}) needs tables of fixed names: a tenant-scoped type keeps a table per period`,
      tenancy.node,
    );
  }
  if (tenancy.isolation !== 'TABLE') return;
  for (const table of tenantTables(model)) {
    if (table.length + 1 + TENANT_TABLE_KEY_LENGTH > 63) {
      problems.add(
        'schema',
        `@tenancy(isolation: TABLE): table ${table} is too long for a tenant's own (${63 - 1 - TENANT_TABLE_KEY_LENGTH} characters at most, the table prefix included)`,
        tenancy.node,
      );
    }
  }
}

/** Every check of the file comment, once the model is built. */
export function checkTenantIsolation(schema: GraphQLSchema, model: Model, problems: SchemaProblems): void {
  if (!model.tenancy) return;
  checkArguments(schema, problems);
  checkLayouts(model, problems);
  checkSharedTables(model, problems);
  checkTiers(model, problems);
  for (const path of model.accessPaths.values()) checkPath(path, model, problems);
  for (const summary of model.summaries.values()) {
    if (apart(summary.holder, summary.of)) {
      problems.add(
        `${summary.holder.name}.${summary.field}`,
        `@summary over ${summary.of.name}: ${scopes(summary.holder, summary.of)}, and a summary adds up the entities of one tenant into one of the same`,
        summary.holder.node,
      );
    }
  }
  for (const copies of model.copiesOf.values()) {
    for (const copy of copies) {
      if (!apart(copy.entity, copy.reference.target)) continue;
      problems.add(
        `${copy.entity.name}.${copy.field}`,
        `@copy from ${copy.reference.target.name}: ${scopes(copy.entity, copy.reference.target)}, and a write of one would have to reach every tenant's copies`,
        copy.reference.node,
      );
    }
  }
  for (const dependents of model.dependentsOf.values()) {
    for (const d of dependents) {
      if (!apart(d.entity, d.reference.target)) continue;
      problems.add(
        d.reference.coordinate,
        `a delete of ${d.reference.target.name} must see to the ${d.entity.name} entities pointing at it (onDelete ${d.onDelete}), and ${scopes(d.entity, d.reference.target)}: it would have to find them in every tenant. Declare the reference with checkOnWrite: false, give the @global type no delete, or make both types tenant-scoped or @global`,
        d.reference.node,
      );
    }
  }
}

/** Whether one of two types is tenant-scoped and the other `@global`. */
function apart(a: EntityModel, b: EntityModel): boolean {
  return Boolean(a.tenantScoped) !== Boolean(b.tenantScoped);
}

function scopes(a: EntityModel, b: EntityModel): string {
  const scope = (e: EntityModel) => `${e.name} is ${e.tenantScoped ? 'tenant-scoped' : '@global'}`;
  return `${scope(a)} and ${scope(b)}`;
}

/** The tenant is never an argument: an argument of that name would read as if it chose one. */
function checkArguments(schema: GraphQLSchema, problems: SchemaProblems): void {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      for (const arg of field.args) {
        if (arg.name !== TENANT_FIELD) continue;
        problems.add(
          `${type.name}.${field.name}(${arg.name}:)`,
          `"${TENANT_FIELD}" is the tenant's, which comes from the caller's token, never from an argument`,
          arg.astNode,
        );
      }
    }
  }
}

/** Construction held: every PartitionKey of a tenant-scoped type, its indexes' included, starts with the tenant. */
function checkLayouts(model: Model, problems: SchemaProblems): void {
  for (const e of model.entities.values()) {
    if (!e.tenantScoped) continue;
    const layouts = [e.layout, ...[...e.indexes.values()].map((i) => i.layout)];
    if (layouts.some((l) => !startsWithTenant(l.partitionKey)))
      problems.add(e.name, 'a PartitionKey of this tenant-scoped type does not start with its tenant', e.node);
  }
}

/** A table holds tenant-scoped layouts or `@global` ones, never both: a global PartitionKey could be a tenant's. */
function checkSharedTables(model: Model, problems: SchemaProblems): void {
  const byTable = new Map<string, Array<{ owner: string; scoped: boolean; node?: ASTNode }>>();
  for (const e of model.entities.values()) {
    const owners = [
      { owner: e.name, table: e.layout.table, node: e.node },
      ...[...e.indexes.values()].map((i) => ({ owner: `${e.name}@index(${i.name})`, table: i.layout.table, node: i.node })),
    ];
    for (const o of owners) byTable.set(o.table, [...(byTable.get(o.table) ?? []), { owner: o.owner, scoped: Boolean(e.tenantScoped), node: o.node }]);
  }
  for (const [table, owners] of byTable) {
    const scoped = owners.find((o) => o.scoped);
    const global = owners.find((o) => !o.scoped);
    if (!scoped || !global) continue;
    problems.add(
      global.owner,
      `shares table ${table} with ${scoped.owner}, which is tenant-scoped: keep @global types in tables of their own, so that no PartitionKey of theirs can be a tenant's`,
      global.node,
    );
  }
}

/**
 * A path to a tenant-scoped target renders its PartitionKey's tenant from the token, or from a tenant-scoped parent's
 * own tenant: nothing else. (field-bindings.ts refuses a `@global` parent; this holds the result to it.)
 */
function checkPath(path: AccessPath, model: Model, problems: SchemaProblems): void {
  if (!path.target.tenantScoped && !path.index?.entity.tenantScoped && !(path.kind === 'range' && path.join?.entity.tenantScoped)) return;
  const parent = model.entities.get(path.parentType);
  const ok = (bound: BoundTemplate) => {
    const b = bound.bindings.get(TENANT_FIELD);
    if (!startsWithTenant(bound.template) || !b) return false;
    return b.source === 'tenant' ? !parent : b.source === 'parent' && b.name === TENANT_FIELD && Boolean(parent?.tenantScoped);
  };
  if (!ok(path.partitionKey)) {
    problems.add(
      path.coordinate,
      `reads a tenant-scoped type, and its PartitionKey "${path.partitionKey.template.source}" does not take the tenant from the caller's token`,
      path.node,
    );
  }
}
