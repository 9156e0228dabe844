/**
 * OpenTelemetry tracing of a long-running process (server, worker): off unless the standard OTEL_* variables ask
 * for it (config.ts reads them), then a tracer provider exporting over OTLP/HTTP — to an OpenTelemetry Collector,
 * Jaeger, or Azure Monitor (docs/deploy.md#traces) — with W3C trace context, the AsyncLocalStorage context manager,
 * and the Azure SDK's own spans (`@azure/opentelemetry-instrumentation-azure-sdk`) under the project's (spans.ts).
 */
import * as coreTracing from '@azure/core-tracing';
import { AzureSdkInstrumentation } from '@azure/opentelemetry-instrumentation-azure-sdk';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace';
import { useTracer } from './spans';

/** What config.ts read of the OTEL_* variables: undefined = tracing off. */
export interface TracingConfig {
  /** OTEL_TRACES_EXPORTER: `otlp` (OTLP/HTTP to OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT) or `console` (stdout, debugging). */
  exporter: 'otlp' | 'console';
  /** OTEL_SERVICE_NAME (default `tablegraph-server` or `tablegraph-worker`). */
  serviceName?: string;
}

/**
 * The Azure SDK traces through @azure/core-tracing's instrumenter; its OpenTelemetry instrumentation sets it when the
 * module is required. This process has required it already (every storage module imports the SDK), so the patch is
 * applied to the loaded module at once, and no require hook is installed (`enabled: false`).
 */
class AzureSdkHook extends AzureSdkInstrumentation {
  constructor() {
    super({ enabled: false });
  }

  patchLoaded(): void {
    const found = this.init();
    const definitions = Array.isArray(found) ? found : found ? [found] : [];
    for (const definition of definitions) definition.patch?.(coreTracing, '1.0.0');
  }
}

export interface Tracing {
  /** Exports the spans still buffered and stops (graceful shutdown). */
  shutdown(): Promise<void>;
}

/**
 * Registers the global tracer provider, context manager and propagator, hooks the Azure SDK's tracing to it, and
 * turns the project's spans on. Call once, before the process serves.
 * @param exporter where spans go: default, the one `config.exporter` names; tests pass an in-memory exporter
 *   (exported at once, not batched)
 */
export function startTracing(config: TracingConfig, defaultServiceName: string, exporter?: SpanExporter): Tracing {
  const target = exporter ?? (config.exporter === 'console' ? new ConsoleSpanExporter() : new OTLPTraceExporter());
  const processor = exporter ? new SimpleSpanProcessor({ exporter: target }) : new BatchSpanProcessor({ exporter: target });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName ?? defaultServiceName }),
    spanProcessors: [processor],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  new AzureSdkHook().patchLoaded();
  useTracer(provider.getTracer('tablegraph'));
  return {
    async shutdown() {
      useTracer(undefined);
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
