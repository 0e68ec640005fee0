// A stateless run with the Agent Protocol's JavaScript client (@langchain/langgraph-sdk):
// runs.stream(null, ...) streams the answer in a thread of its own, deleted once the run
// has ended; runs.wait(null, ..., { onCompletion: "keep" }) keeps its thread. Against
// ostinato at argv[2]/langgraph. Prints one JSON object: what the test asserts on.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: `${process.argv[2]}/langgraph` });
const say = (text) => ({ messages: [{ type: "human", content: text }] });

async function collect(parts) {
  const out = [];
  for await (const part of parts) out.push(part);
  return out;
}

async function status(threadId) {
  try {
    await client.threads.get(threadId);
    return 200;
  } catch (error) {
    return error.status ?? String(error);
  }
}

const created = [];
const parts = await collect(
  client.runs.stream(null, "ostinato", {
    input: say("hello from js"),
    streamMode: ["values", "messages-tuple"],
    onRunCreated: (made) => created.push(made),
  }),
);
const values = parts.filter((p) => p.event === "values").map((p) => p.data);
const last = values[values.length - 1].messages;
const threadId = created[0].thread_id;
let after = await status(threadId);
for (let i = 0; i < 300 && after === 200; i++) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  after = await status(threadId);
}

const kept = [];
const waited = await client.runs.wait(null, "ostinato", {
  input: say("keep this"),
  onCompletion: "keep",
  onRunCreated: (made) => kept.push(made),
});
const found = await client.threads.search({ limit: 100 });

console.log(
  JSON.stringify({
    events: [...new Set(parts.map((p) => p.event))],
    runId: parts[0].data.run_id,
    created: created[0],
    types: last.map((m) => m.type),
    chunks: parts.filter((p) => p.event === "messages").length,
    after,
    waited: waited.messages.map((m) => m.type),
    keptThread: kept[0].thread_id,
    found: found.map((t) => t.thread_id),
  }),
);
