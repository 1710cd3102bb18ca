// Start a run, stream it from its first event, answer its clarification
// question:
//
//   npm ci --prefix clients/typescript && npm run --prefix clients/typescript build:examples
//   node clients/typescript/examples/dist/ask.js "Compare our revenue across periods." "Q2 vs Q3 2026"
//
// BAAGENT_GRPC is the gateway (default http://localhost:7700); BAAGENT_API_KEY,
// when set, is sent as the bearer key (a gateway without keys serves loopback
// callers).
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { GatewayService } from "@baagent/client/baagent/v1/gateway_pb";
import { RunInputSchema } from "@baagent/client/baagent/v1/orchestrator_pb";

const [question, answer] = process.argv.slice(2);
const gateway = createClient(GatewayService, createGrpcTransport({ baseUrl: process.env.BAAGENT_GRPC ?? "http://localhost:7700" }));
const key = process.env.BAAGENT_API_KEY;
const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};

// The question is published just before the run records that it waits: an
// answer sent at once can be refused as FailedPrecondition; retry.
async function submit(runId: string, questionId: string) {
  for (let i = 0; i < 100; i++) {
    try {
      return await gateway.submitInput({ runId, input: create(RunInputSchema, { inputId: questionId, answer }) }, { headers });
    } catch (err) {
      if (ConnectError.from(err).code !== Code.FailedPrecondition) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  throw new Error("the run never waited for the answer");
}

let runId = "";
for await (const msg of gateway.startRunStream({ spec: { input: question } }, { headers })) {
  if (msg.payload.case === "run") { // the first message: the run itself
    runId = msg.payload.value.runId;
    console.log("run", runId);
    continue;
  }
  const event = msg.payload.value!;
  console.log(event.seq.toString(), event.type);
  switch (event.payload.case) {
    case "clarificationAsked":
      console.log("  question:", event.payload.value.question, "->", answer);
      await submit(runId, event.payload.value.questionId);
      break;
    case "complete":
      console.log(event.payload.value.content);
      break;
    case "error":
      throw new Error("run failed: " + event.payload.value.message);
    case "cancelled":
      throw new Error("run cancelled");
  }
}
