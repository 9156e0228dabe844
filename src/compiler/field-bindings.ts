/**
 * Binds a field's key templates — its table per period, PartitionKey and RowKey — to where each placeholder gets its
 * value: the field's arguments or the parent entity's stored fields. A field's own template must address the
 * layout's (same literals and formats). Used by access-paths.ts for every `@point` and `@range` field.
 */
import { isNonNullType, isObjectType, isScalarType, getNamedType, type GraphQLField, type GraphQLObjectType } from 'graphql';
import type { KeyTemplate, TemplateSegment } from '../model/key-template';
import type { PointDirective } from './directives';
import { parseTemplate } from './parse-template';
import { startsWithTenant, TENANT_FIELD, withTenant } from '../model/tenancy';
import type { SchemaProblems } from './schema-errors';
import type { Binding, BoundTemplate, EntityModel, Layout } from '../model/types';

export type FieldOf = GraphQLField<unknown, unknown>;

export interface FieldContext {
  parent: GraphQLObjectType;
  field: FieldOf;
  coordinate: string;
  parentEntity?: EntityModel;
  problems: SchemaProblems;
  /** The directive being compiled: a point field may be an optional reference, a range may not. */
  kind?: 'point' | 'range';
  /** Prepended to every table name and table template (CompileOptions.tablePrefix). */
  tablePrefix: string;
}

/**
 * The table of a layout with a table per period (period-tables.ts): the field's `table` template — the layout's
 * shape, its placeholder named after an argument or parent field — or the layout's own, bound.
 * @returns undefined for a layout with one table (where `table` is refused), null after a recorded problem
 */
export function boundTable(ctx: FieldContext, source: string | undefined, layout: Layout, node: PointDirective['node']): BoundTemplate | undefined | null {
  if (!layout.tableTemplate) {
    if (source === undefined) return undefined;
    ctx.problems.add(ctx.coordinate, `table: "${source}" is for a type with a table per period; ${layout.table} is one table`, node);
    return null;
  }
  return (
    boundTemplate(
      ctx,
      { source: source === undefined ? undefined : ctx.tablePrefix + source, layout: layout.tableTemplate, what: 'Table', mode: 'exact' },
      node,
    ) ?? null
  );
}

/**
 * The field's own template (or the layout's) with a binding for each placeholder. A field template must have the
 * layout template's shape (same literals, same formats; placeholder names may differ): `exact`, or the layout's
 * beginning in `prefix` mode.
 */
export function boundTemplate(
  ctx: FieldContext,
  key: {
    /** The field's own template, if it gives one. */
    source: string | undefined;
    /** The layout's template it must match. */
    layout: KeyTemplate | undefined;
    /** What the template is, for problems: 'PartitionKey', 'RowKey', 'Table'. */
    what: string;
    mode: 'exact' | 'prefix';
  },
  node: PointDirective['node'],
): BoundTemplate | undefined {
  const { source, layout: layoutTemplate, what, mode } = key;
  let template = layoutTemplate;
  if (source !== undefined) {
    template = parseTemplate(source, what, ctx.coordinate, node, ctx.problems);
    if (!template) return undefined;
    // A field's PartitionKey over a tenant-scoped layout is written without the tenant, which comes first.
    if (layoutTemplate && startsWithTenant(layoutTemplate)) template = withTenant(template);
    if (layoutTemplate) {
      const problem = shapeProblem(template, layoutTemplate, mode);
      if (problem) {
        ctx.problems.add(ctx.coordinate, `${what} template "${source}" does not address "${layoutTemplate.source}": ${problem}`, node);
        return undefined;
      }
    }
  }
  if (!template) return undefined;
  const bindings = new Map<string, Binding>();
  for (const name of template.fields) {
    const binding = bind(ctx, name);
    if (typeof binding === 'string') {
      ctx.problems.add(ctx.coordinate, `${what} template "${template.source}" needs {${name}}: ${binding}`, node);
      return undefined;
    }
    bindings.set(name, binding);
  }
  return { template, bindings };
}

/**
 * A placeholder's value: the field's non-null argument of that name, else the parent entity's stored field, which
 * must be non-null too, except on an optional reference — a nullable `@point` field — where a null value makes the
 * field null.
 * @returns the binding, or why there is none
 */
function bind(ctx: FieldContext, name: string): Binding | string {
  if (name === TENANT_FIELD) return bindTenant(ctx);
  const optionalAllowed = ctx.kind === 'point' && !isNonNullType(ctx.field.type);
  const arg = ctx.field.args.find((a) => a.name === name);
  if (arg) {
    if (!isScalarLike(arg.type)) return `argument "${name}" must be a scalar or an enum`;
    if (isNonNullType(arg.type)) return { source: 'argument', name };
    return `add a non-null argument "${name}" (it is ${arg.type.toString()}): a key is never guessed`;
  }
  const stored = ctx.parentEntity?.fields.get(name);
  if (stored?.value)
    return `the stored field ${ctx.parent.name}.${name} is a value object (${stored.graphqlType}), which is no key value: add a non-null argument "${name}" of a scalar type`;
  if (stored?.list || stored?.series)
    return `the stored field ${ctx.parent.name}.${name} is a list, which names no one key: add a non-null argument "${name}" of its element type`;
  if (stored?.nonNull) return { source: 'parent', name };
  if (stored && optionalAllowed) return { source: 'parent', name, optional: true };
  if (stored) {
    return `the stored field ${ctx.parent.name}.${name} is nullable: make ${ctx.coordinate} nullable (an optional reference: null, with no storage call, when ${name} is null)${ctx.kind === 'point' ? '' : ' — a connection cannot be; give the range a non-null field'} or make ${name} non-null`;
  }
  return `add a non-null argument "${name}"${ctx.parentEntity ? ` or a stored field "${name}" on ${ctx.parent.name}` : ''}`;
}

/**
 * The tenant of a tenant-scoped target: the parent entity's own (read within the caller's tenant), or on a field of
 * any other type the verified token's — never an argument. A `@global` parent has none: it cannot reach a tenant.
 */
function bindTenant(ctx: FieldContext): Binding | string {
  if (ctx.parentEntity?.tenantScoped) return { source: 'parent', name: TENANT_FIELD };
  if (!ctx.parentEntity) return { source: 'tenant', name: TENANT_FIELD };
  return `${ctx.parent.name} is @global and its target is tenant-scoped: a type every tenant shares cannot lead to one tenant's entities (@tenancy); mark the target @global too, or serve the field from a tenant-scoped type`;
}

function isScalarLike(type: FieldOf['args'][number]['type']): boolean {
  const named = getNamedType(type);
  return isScalarType(named) || !isObjectType(named);
}

/** The layout's RowKey template up to its first placeholder that no argument supplies (possibly empty). */
export function derivedPrefix(ctx: FieldContext, layout: KeyTemplate): KeyTemplate {
  const segments: TemplateSegment[] = [];
  for (const seg of layout.segments) {
    if (seg.kind === 'placeholder' && !ctx.field.args.some((a) => a.name === seg.name && isNonNullType(a.type))) break;
    segments.push(seg);
  }
  const fields = segments.flatMap((s) => (s.kind === 'placeholder' ? [s.name] : []));
  return { source: segments.map(segmentSource).join(''), segments, fields };
}

/** The template source text of one segment. */
function segmentSource(seg: TemplateSegment): string {
  if (seg.kind === 'literal') return seg.text;
  if (seg.format.kind === 'padded') return `{${seg.name}:0${seg.format.width}}`;
  if (seg.format.kind === 'descending') return `{${seg.name}:desc0${seg.format.width}}`;
  if (seg.format.kind === 'invertedTicks') return `{${seg.name}:invertedTicks}`;
  if (seg.format.kind === 'date') return `{${seg.name}:${seg.format.pattern}}`;
  if (seg.format.kind === 'hashBucket') return `{${seg.name}:hash${seg.format.buckets}}`;
  return `{${seg.name}}`;
}

function sameShape(a: TemplateSegment, b: TemplateSegment): boolean {
  if (a.kind === 'literal' || b.kind === 'literal') return a.kind === 'literal' && b.kind === 'literal' && a.text === b.text;
  return JSON.stringify(a.format) === JSON.stringify(b.format);
}

/** Why `field` does not address `layout` (undefined when it does). */
function shapeProblem(field: KeyTemplate, layout: KeyTemplate, mode: 'exact' | 'prefix'): string | undefined {
  const f = field.segments;
  const l = layout.segments;
  if (mode === 'exact' && f.length !== l.length) return `it has ${f.length} part(s), the layout ${l.length}`;
  if (f.length > l.length) return 'it is longer than the layout';
  for (let i = 0; i < f.length; i++) {
    const a = f[i];
    const b = l[i];
    const lastOfPrefix = mode === 'prefix' && i === f.length - 1;
    if (lastOfPrefix && a.kind === 'literal' && b.kind === 'literal' && b.text.startsWith(a.text)) continue;
    if (!sameShape(a, b)) return `part ${i + 1} is ${segmentSource(a)} where the layout has ${segmentSource(b)}`;
  }
  return undefined;
}
