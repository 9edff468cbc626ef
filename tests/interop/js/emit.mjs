// Reproduce the scenario of tests/interop/scenario.py with the OpenTelemetry JavaScript SDK and send it, in one
// request, to a collector over OTLP/HTTP: `node emit.mjs <scenario.json> <json|proto> <collector base URL>`.
// Exits 0 only when the exporter reports success.
import { readFileSync } from 'node:fs';
import { context, trace } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';

const [scenarioPath, encoding, baseUrl] = process.argv.slice(2);
if (!scenarioPath || !['json', 'proto'].includes(encoding) || !baseUrl) {
  console.error('usage: node emit.mjs <scenario.json> <json|proto> <collector base URL>');
  process.exit(2);
}
const doc = JSON.parse(readFileSync(scenarioPath, 'utf8'));

// ids in creation order, so both SDKs produce the very same spans
const traceIds = doc.traces.map((t) => t.traceId);
const spanIds = doc.traces.flatMap((t) => t.spans.map((s) => s.spanId));
const idGenerator = {
  generateTraceId: () => traceIds.shift(),
  generateSpanId: () => spanIds.shift(),
};

const memory = new InMemorySpanExporter();
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes(doc.resource),
  idGenerator,
  spanProcessors: [new SimpleSpanProcessor(memory)],
});
const tracer = provider.getTracer(doc.scope.name, doc.scope.version);

for (const t of doc.traces) {
  const made = new Map();
  for (const s of t.spans) {
    const parentCtx = s.parent ? trace.setSpan(context.active(), made.get(s.parent)) : context.active();
    const span = tracer.startSpan(
      s.name,
      { kind: s.kind, attributes: s.attributes, startTime: s.start, root: !s.parent },
      parentCtx,
    );
    if (s.status.code) span.setStatus(s.status);
    for (const e of s.events) span.addEvent(e.name, e.attributes, e.time);
    made.set(s.spanId, span);
  }
  for (const s of [...t.spans].reverse()) made.get(s.spanId).end(s.end);
}

const url = `${baseUrl.replace(/\/$/, '')}/v1/traces`;
const exporter = encoding === 'json' ? new JsonExporter({ url }) : new ProtoExporter({ url });
const result = await new Promise((resolve) => exporter.export(memory.getFinishedSpans(), resolve));
await exporter.shutdown();
if (result.code !== ExportResultCode.SUCCESS) {
  console.error(`export failed: ${result.error ?? 'unknown error'}`);
  process.exit(1);
}
console.log(`exported ${memory.getFinishedSpans().length} spans as ${encoding}`);
