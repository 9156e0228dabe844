/** Values for a path's key placeholders, from the field's arguments and the parent entity. */
import type { GraphQLResolveInfo } from 'graphql';
import type { BoundTemplate } from '../model/types';
import type { RequestContext } from './context';
import { fieldValue, type EntityNode } from './entity-node';

/**
 * @returns placeholder name → value for every placeholder of `templates`
 */
export async function bindingValues(
  templates: Array<BoundTemplate | undefined>,
  parent: EntityNode | undefined,
  args: Record<string, unknown>,
  ctx: RequestContext,
  info: GraphQLResolveInfo,
): Promise<Record<string, unknown>> {
  const values: Record<string, unknown> = {};
  for (const bound of templates) {
    if (!bound) continue;
    for (const [placeholder, binding] of bound.bindings) {
      values[placeholder] = binding.source === 'argument' ? args[binding.name] : parent ? await fieldValue(parent, binding.name, ctx, info) : undefined;
    }
  }
  return values;
}
