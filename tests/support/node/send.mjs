// Sends orchestrator task traces to an OTLP/HTTP endpoint with the OpenTelemetry JS SDK.
//   node send.mjs <json|proto> <endpoint .../v1/traces> <prefix> <tasks> [<limit>]
// With a limit, the SDK's attribute value length limit, each title is cut by the SDK
// inside its emoji: JavaScript strings are UTF-16, so the cut leaves half of it.
import { context, trace } from "@opentelemetry/api";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";

const [protocol, url, prefix, count, limit] = process.argv.slice(2);
const Exporter = protocol === "proto" ? ProtoExporter : JsonExporter;
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": `node-${protocol}` }),
  spanLimits: limit ? { attributeValueLengthLimit: Number(limit) } : {},
  spanProcessors: [new BatchSpanProcessor(new Exporter({ url }))],
});
const tracer = provider.getTracer("orchestrator");

for (let n = 0; n < Number(count); n++) {
  const task = tracer.startSpan("orchestrator.task", {
    attributes: {
      "orchestrator.task.id": `${prefix}-${n}`,
      "orchestrator.task.title": limit
        ? `Node ${protocol} task ${n}`.padEnd(Number(limit) - 1, ".") + "\u{1F389} shipped"
        : `Node ${protocol} task ${n}`,
      "orchestrator.agent.name": `node-${protocol}`,
      "orchestrator.escalation_count": n % 2,
    },
  });
  const ctx = trace.setSpan(context.active(), task);
  for (let call = 0; call < 2; call++) {
    const chat = tracer.startSpan("chat gpt-node", {
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-node",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
      },
    }, ctx);
    chat.end();
  }
  task.end();
}
await provider.forceFlush();
await provider.shutdown();
