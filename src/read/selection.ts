/**
 * `@skip` and `@include` as execution reads them (the GraphQL specification's CollectFields): a field, fragment spread
 * or inline fragment is left out when `@skip(if: true)` or `@include(if: false)` says so for the request's variables.
 * Projection (projection.ts) and demand (demand.ts) leave out what execution leaves out, so a skipped field neither
 * costs a read nor widens a `$select`.
 */
import { getDirectiveValues, GraphQLIncludeDirective, GraphQLSkipDirective, type SelectionNode } from 'graphql';

/**
 * Whether execution selects `node` for `variables` (coerced, or raw: `if` is read as a boolean either way).
 * @example isIncluded(fieldNodeOf('name @include(if: $withName)'), { withName: false }) // false
 */
export function isIncluded(node: SelectionNode, variables: Record<string, unknown>): boolean {
  if (!node.directives || node.directives.length === 0) return true;
  try {
    if (getDirectiveValues(GraphQLSkipDirective, node, variables)?.if === true) return false;
    return getDirectiveValues(GraphQLIncludeDirective, node, variables)?.if !== false;
  } catch {
    // A condition whose variable was not given: execution refuses the request; until then, it counts as selected.
    return true;
  }
}
