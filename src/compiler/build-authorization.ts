/**
 * Compiles `@auth` (the guide's "Security" advice, done in the schema): reads each rule and checks that what a rule
 * scopes by can be decided where the entity is read. What the rules decide at run time is src/model/authorization.ts.
 */
import { getDirectiveValues, isObjectType, type DirectiveNode, type GraphQLObjectType, type GraphQLSchema } from 'graphql';
import type { SchemaProblems } from './schema-errors';
import type { AuthPolicy, AuthRule, EntityModel, Model } from '../model/types';

/** Roles and claims are plain tokens: letters, digits and `-_.:/@`. */
const TOKEN = /^[A-Za-z0-9_.:/@-]+$/;

/**
 * Reads an `@auth` directive (on a type or a field) and checks it: scope fields are stored fields of `entity`,
 * `fields` (mutations only, `inputFields` given) are input fields, roles and claims are plain tokens.
 * @returns the policy, or undefined when there is none or it is invalid (a problem is recorded then)
 */
export function readAuth(
  schema: GraphQLSchema,
  at: {
    /** The type's or field's SDL node. */
    node: { directives?: readonly DirectiveNode[] } | undefined | null;
    entity: EntityModel | undefined;
    coordinate: string;
    /** A mutation's input fields. */
    inputFields?: Set<string>;
  },
  problems: SchemaProblems,
): AuthPolicy | undefined {
  const { node, entity, coordinate, inputFields } = at;
  const d = node?.directives?.find((x) => x.name.value === 'auth');
  const def = schema.getDirective('auth');
  if (!d || !def) return undefined;
  const v = getDirectiveValues(def, { directives: [d] }) as {
    rules: Array<{ roles?: string[]; scope?: Array<{ field: string; claim: string }>; fields?: string[] }>;
  };
  const fail = (message: string) => void problems.add(coordinate, `@auth: ${message}`, d);
  const rules: AuthRule[] = [];
  if (v.rules.length === 0) fail('give at least one rule (an empty list would let nobody in)');
  for (const [i, r] of v.rules.entries()) {
    const rule: AuthRule = { scope: r.scope ?? [], ...(r.roles && { roles: r.roles }), ...(r.fields && { fields: r.fields }) };
    if (rule.roles?.length === 0) fail(`rule ${i + 1}: roles: [] lets nobody in; leave roles out to allow any role`);
    for (const role of rule.roles ?? []) if (!TOKEN.test(role)) fail(`rule ${i + 1}: role "${role}" is not a plain token`);
    for (const s of rule.scope) {
      const scoped = entity?.fields.get(s.field);
      if (!scoped) fail(`rule ${i + 1}: scope field "${s.field}" is not a stored field of ${entity?.name ?? 'the entity'}`);
      // A scope compares one value with the claim's: a list's or a value object's text would be compared as a whole.
      else if (scoped.list || scoped.series || scoped.value)
        fail(`rule ${i + 1}: scope field "${s.field}" is ${scoped.value ? 'a value object' : 'a list'}: a scope compares one stored value with the claim`);
      if (!TOKEN.test(s.claim)) fail(`rule ${i + 1}: claim "${s.claim}" is not a plain token`);
    }
    if (rule.fields && !inputFields) fail(`rule ${i + 1}: fields restricts a mutation's input; this is not a mutation`);
    for (const f of rule.fields ?? []) if (inputFields && !inputFields.has(f)) fail(`rule ${i + 1}: "${f}" is not a field of the mutation's input`);
    rules.push(rule);
  }
  return { rules, node: d };
}

/**
 * Reads every `@auth` of the schema into the model: on entity types, on fields that read storage, on stored fields
 * and on mutations. Secure by default: once a schema uses `@auth`, every entity type and every mutation must say
 * who may (a problem otherwise). A type's scope fields must be projected onto each of its indexes, so a list read
 * through an index is filtered from its index entities, with no read more.
 */
export function buildAuthorization(schema: GraphQLSchema, model: Model, problems: SchemaProblems): void {
  let used = false;
  for (const entity of model.entities.values()) {
    const type = schema.getType(entity.name);
    if (!isObjectType(type)) continue;
    entity.auth = readAuth(schema, { node: type.astNode, entity, coordinate: entity.name }, problems);
    for (const field of entity.fields.values()) {
      const auth = readAuth(schema, { node: type.getFields()[field.name]?.astNode, entity, coordinate: `${entity.name}.${field.name}` }, problems);
      if (auth) field.auth = auth;
    }
    used ||= Boolean(entity.auth) || [...entity.fields.values()].some((f) => f.auth);
    for (const rule of entity.auth?.rules ?? []) {
      for (const { field } of rule.scope) {
        for (const index of entity.indexes.values()) {
          if (!index.projection.has(field)) {
            problems.add(
              `${entity.name}@index(${index.name})`,
              `projects no "${field}", which ${entity.name}'s @auth scopes by: add it to include, so a list read through the index is filtered without reading each entity`,
              index.node,
            );
          }
        }
      }
    }
  }
  for (const path of model.accessPaths.values()) {
    const field = (schema.getType(path.parentType) as GraphQLObjectType | undefined)?.getFields()[path.fieldName];
    const auth = readAuth(schema, { node: field?.astNode, entity: path.target, coordinate: path.coordinate }, problems);
    if (auth) path.auth = auth;
    used ||= Boolean(auth);
  }
  const mutation = schema.getMutationType();
  for (const write of model.writes.values()) {
    const field = mutation?.getFields()[write.coordinate.split('.')[1]];
    const auth = readAuth(schema, { node: field?.astNode, entity: write.entity, coordinate: write.coordinate, inputFields: write.inputFields }, problems);
    if (auth) write.auth = auth;
    used ||= Boolean(auth);
  }
  for (const entity of model.entities.values()) {
    const policies = [entity.auth, ...[...model.accessPaths.values()].filter((p) => p.target === entity).map((p) => p.auth)];
    for (const policy of policies) for (const rule of policy?.rules ?? []) for (const { field } of rule.scope) entity.authFields.add(field);
  }
  if (!used) return;
  for (const entity of model.entities.values()) {
    if (!entity.auth) problems.add(entity.name, 'the schema uses @auth, so every entity type says who may read it: add @auth to the type', entity.node);
  }
  for (const write of model.writes.values()) {
    if (!write.auth)
      problems.add(
        write.coordinate,
        'the schema uses @auth, so every mutation says who may run it: add @auth to the field',
        mutation?.getFields()[write.coordinate.split('.')[1]]?.astNode,
      );
  }
}
