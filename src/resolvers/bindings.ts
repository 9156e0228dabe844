/** Values for a path's key placeholders, from the field's arguments and the parent entity. */
import type { GraphQLResolveInfo } from 'graphql';
import { checkConstraint } from '../model/constraints';
import type { BoundTemplate, EntityModel } from '../model/types';
import type { RequestContext } from './context';
import { fieldValue, type EntityNode } from './entity-node';
import { requireTenant } from '../model/tenancy';

/** A resolver's call: its parent entity (absent for a root field), arguments, request context and info. */
export interface ResolverCall {
  parent: EntityNode | undefined;
  args: Record<string, unknown>;
  ctx: RequestContext;
  info: GraphQLResolveInfo;
}

/**
 * @param target the entity the templates address: an argument bound to a placeholder named after one of its
 *   fields must keep that field's `@constraint`, checked here, before any storage call
 * @returns placeholder name → value for every placeholder of `templates`
 * @throws TablegraphError BAD_USER_INPUT when an argument breaks its field's `@constraint`; UNAUTHENTICATED when a
 *   placeholder is the tenant and the request names none
 */
export async function bindingValues(templates: Array<BoundTemplate | undefined>, call: ResolverCall, target?: EntityModel): Promise<Record<string, unknown>> {
  const { parent, args, ctx, info } = call;
  const values: Record<string, unknown> = {};
  for (const bound of templates) {
    if (!bound) continue;
    for (const [placeholder, binding] of bound.bindings) {
      if (binding.source === 'tenant') {
        values[placeholder] = requireTenant(ctx.principal?.tenant);
      } else if (binding.source === 'argument') {
        const field = target?.fields.get(placeholder);
        if (field) checkConstraint(field, args[binding.name]);
        values[placeholder] = args[binding.name];
      } else {
        values[placeholder] = parent ? await fieldValue(parent, binding.name, ctx, info) : undefined;
      }
    }
  }
  return values;
}
