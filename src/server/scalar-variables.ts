/**
 * Variables that certainly coerce, told without coercing them: an operation whose variables are all of the built-in
 * scalar types (`ID`, `String`, `Int`, `Float`, `Boolean`, nullable or not) takes values of a few JavaScript types,
 * and a value of one of them coerces (graphql-js `coerceInputValue`; the GraphQL spec, "Coercing Variable Values").
 * The query lane (query-lane.ts) checks a request's variables before it makes the request's context, so that
 * variables that do not coerce are refused by Apollo, in its words; the operation then coerces them again as it runs.
 * For the common case — ids and strings — this check replaces the first coercion. Anything else (an enum, an input
 * object, a list, a custom scalar, a schema whose built-in scalars are not graphql-js's own) is not told here.
 */
import {
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  GraphQLString,
  isNonNullType,
  typeFromAST,
  type GraphQLSchema,
  type VariableDefinitionNode,
} from 'graphql';

/** Whether a value of a built-in scalar coerces (null and undefined are decided by the caller). */
type ValueCheck = (value: unknown) => boolean;

const INT_MAX = 2147483647;
const INT_MIN = -2147483648;

/** What each built-in scalar's `parseValue` accepts (graphql-js src/type/scalars.ts). */
const CHECKS = new Map<unknown, ValueCheck>([
  [GraphQLString, (v) => typeof v === 'string'],
  [GraphQLID, (v) => typeof v === 'string' || Number.isInteger(v)],
  [GraphQLInt, (v) => Number.isInteger(v) && (v as number) <= INT_MAX && (v as number) >= INT_MIN],
  [GraphQLFloat, (v) => typeof v === 'number' && Number.isFinite(v)],
  [GraphQLBoolean, (v) => typeof v === 'boolean'],
]);

/**
 * The check of an operation's variables, made once per operation.
 * @param definitions the operation's variable definitions
 * @returns a function that is true when `variables` certainly coerce (false: not told here; coerce them), or
 *   undefined when a variable is not of a built-in scalar type (coerce them always)
 * @example
 *   const definitions = operation.variableDefinitions ?? [];
 *   const check = scalarVariablesCheck(schema, definitions); // once, when the operation is prepared
 *   if (!check?.(variables) && 'errors' in getVariableValues(schema, definitions, variables)) refuse();
 */
export function scalarVariablesCheck(
  schema: GraphQLSchema,
  definitions: readonly VariableDefinitionNode[],
): ((variables: Record<string, unknown>) => boolean) | undefined {
  const variables: Array<{ name: string; check: ValueCheck; nonNull: boolean; hasDefault: boolean }> = [];
  for (const definition of definitions) {
    const type = typeFromAST(schema, definition.type);
    const nonNull = type !== undefined && isNonNullType(type);
    const check = CHECKS.get(nonNull ? type.ofType : type);
    if (!check) return undefined;
    variables.push({ name: definition.variable.name.value, check, nonNull, hasDefault: definition.defaultValue !== undefined });
  }
  return (values) => {
    for (const v of variables) {
      // Only its own properties, as graphql-js reads them.
      const value = Object.hasOwn(values, v.name) ? values[v.name] : undefined;
      if (value === undefined) {
        if (v.nonNull && !v.hasDefault) return false;
      } else if (value === null) {
        if (v.nonNull) return false;
      } else if (!v.check(value)) {
        return false;
      }
    }
    return true;
  };
}
