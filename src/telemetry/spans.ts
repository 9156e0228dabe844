/**
 * The project's OpenTelemetry spans, and nothing when tracing is off: every helper costs one check then. Spans are
 * made through `@opentelemetry/api`; the provider that records and exports them is set up by tracing.ts at start.
 *
 * Span names (attributes in `tablegraph.*` unless OpenTelemetry's conventions name them):
 * - `graphql.request`: one HTTP request to /graphql (src/server/app.ts); `graphql.operation.name`, `…type`, and the
 *   request's `extensions.cost` as `tablegraph.cost.*`.
 * - `dataloader.point` / `dataloader.range`: one DataLoader batch (src/read/loaders.ts), `tablegraph.keys`.
 * - `table.<operation>` (`table.getEntity`, `table.queryRange`, `table.submitTransaction`, …): one storage call of
 *   the TableStore — the calls `extensions.cost` counts — with `db.collection.name` (the table),
 *   `tablegraph.partition_key`, `tablegraph.kind`, `tablegraph.round_trips` and `tablegraph.entities`; the Azure
 *   SDK's own span and its HTTP span are its children.
 * - `queue.<operation>`: one call of the QueueStore (send, receive, delete, …).
 * - `write.commit`: one group commit of a partition's writes (src/write/partition-committer.ts), linked to the
 *   requests whose writes it carries; its EGT is its `table.submitTransaction` child.
 * - `worker.message`: one fan-out message handled by a worker, linked to the request that sent it (the message's
 *   `traceparent`).
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';

let active: Tracer | undefined;

/** Turns the project's spans on (tracing.ts, once a provider is registered) or off (`undefined`). */
export function useTracer(tracer: Tracer | undefined): void {
  active = tracer;
}

/** Whether spans are recorded: false unless tracing was configured (then storage clients keep the SDK's tracing policy). */
export function tracingOn(): boolean {
  return active !== undefined;
}

/** Where a span is made: under `parent` (a context captured earlier; default the active one), linked to the spans of `links`. */
export interface SpanPlace {
  /** The parent's context; `'root'`: a new trace (a worker's message is linked to its request, not its child). */
  parent?: Context | 'root';
  links?: Array<Context | undefined>;
}

/**
 * Runs `fn` inside a new active span named `name` — a child of the span active now, or of `place.parent` — and ends
 * it when `fn` settles, recording an exception as the span's error. With tracing off, just runs `fn` (no span).
 */
export function inSpan<T>(name: string, attributes: Attributes, fn: (span?: Span) => Promise<T>, place: SpanPlace = {}): Promise<T> {
  if (!active) return fn(undefined);
  const links: Link[] = [];
  for (const linked of place.links ?? []) {
    const spanContext = linked && trace.getSpanContext(linked);
    if (spanContext) links.push({ context: spanContext });
  }
  const parent = place.parent === 'root' ? ROOT_CONTEXT : (place.parent ?? context.active());
  return active.startActiveSpan(name, { attributes, links }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (e as Error)?.message });
      throw e;
    } finally {
      span.end();
    }
  });
}

/** Sets attributes on the span active now (undefined values are left out); nothing with tracing off. */
export function annotateActiveSpan(attributes: Attributes): void {
  if (active) trace.getSpan(context.active())?.setAttributes(attributes);
}

/** The context active now, to make a later span its child (a write's, committed by a group later); undefined with tracing off. */
export function captureContext(): Context | undefined {
  return active ? context.active() : undefined;
}

/** The W3C `traceparent` of the span active now, to carry in a queue message; undefined with tracing off or no span. */
export function currentTraceparent(): string | undefined {
  if (!active || !trace.getSpanContext(context.active())) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** The context a `traceparent` names (to link to), or undefined when it is absent; a malformed one links to nothing. */
export function contextOf(traceparent: string | undefined): Context | undefined {
  if (!active || !traceparent) return undefined;
  return propagation.extract(context.active(), { traceparent });
}

/**
 * Starts a span for an HTTP request and runs `next` inside it (synchronously: the rest of the request follows in its
 * async context); the span ends when `onEnd` is called. A `traceparent` header makes it the caller's child. With
 * tracing off, calls `next` and returns undefined.
 */
export function startRequestSpan(
  name: string,
  headers: Record<string, string | string[] | undefined>,
  attributes: Attributes,
  next: () => void,
): Span | undefined {
  if (!active) {
    next();
    return undefined;
  }
  const parent = propagation.extract(context.active(), headers);
  const span = active.startSpan(name, { attributes, kind: 1 /* SpanKind.SERVER */ }, parent);
  context.with(trace.setSpan(parent, span), next);
  return span;
}
