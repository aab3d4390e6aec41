// An AI SDK agent traced by the AI SDK's OpenTelemetry integration, its spans sent with the
// OpenTelemetry JS SDK's OTLP/protobuf exporter. Asked to fix the types, it calls its build
// tool, which fails on the first target and builds the next, then answers. Each run that
// fails (its model answered an error) is reported, and the next one runs. With "stream",
// each run streams its answer (streamText) instead of waiting for it (generateText), its
// provider asking the model for usage in the stream; with "stream-without-usage", not; with
// "agent", each run is an agent's (ToolLoopAgent.generate) with the same settings.
//   node agent.mjs <model base URL .../v1> <endpoint .../v1/traces> <runs> [mode]
import { trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { OpenTelemetry } from "@ai-sdk/otel";
import { ToolLoopAgent, generateText, registerTelemetry, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const [baseURL, url, runs, mode] = process.argv.slice(2);
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "orders-bot" }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
});
trace.setGlobalTracerProvider(provider);
registerTelemetry(new OpenTelemetry());

const model = createOpenAICompatible({
  name: "local", baseURL, apiKey: "test-key", includeUsage: mode !== "stream-without-usage",
})("gpt-test");
const build = tool({
  description: "Build a target.",
  inputSchema: z.object({ target: z.string() }),
  execute: async ({ target }) => {
    if (target === "orders") {
      throw new Error("TS2345: Argument of type 'string' is not assignable");
    }
    return "built";
  },
});

for (let run = 0; run < Number(runs); run++) {
  try {
    const call = {
      model,
      prompt: "Fix the types in the orders api",
      tools: { build },
      stopWhen: stepCountIs(5),
      maxRetries: 0,
      experimental_telemetry: { isEnabled: true, functionId: "builder" },
    };
    if (mode === "agent") {
      const { prompt, ...settings } = call;
      console.log((await new ToolLoopAgent(settings).generate({ prompt })).text);
    } else if (mode?.startsWith("stream")) {
      const streamed = streamText({ ...call, onError: () => {} });
      console.log(await streamed.text);
    } else {
      console.log((await generateText(call)).text);
    }
  } catch (error) {
    console.log(`failed: ${error.message}`);
  }
}
await provider.forceFlush();
await provider.shutdown();
