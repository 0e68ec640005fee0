// The Agent Protocol's JavaScript client (@langchain/langgraph-sdk), making the calls its
// React useStream hook makes (threads.create, runs.stream with values / messages-tuple /
// updates and the thread head's checkpoint, threads.getHistory, a resume command, a
// cancel, runs.joinStream with Last-Event-ID), against ostinato at argv[2]/langgraph.
// Prints one JSON object: what the test asserts on.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: `${process.argv[2]}/langgraph` });
const say = (text) => ({ messages: [{ type: "human", content: text }] });
const tool = (name, args) => `/tool ${name} ${JSON.stringify(args)}`;
const streamMode = ["values", "messages-tuple", "updates"];

async function collect(parts) {
  const out = [];
  for await (const part of parts) out.push(part);
  return out;
}

async function head(threadId) {
  const [state] = await client.threads.getHistory(threadId, { limit: 10 });
  const { thread_id: _ignored, ...checkpoint } = state.checkpoint;
  return checkpoint;
}

const thread = await client.threads.create({ metadata: { client: "js" } });
const tid = thread.thread_id;
const first = await collect(
  client.runs.stream(tid, "ostinato", {
    input: say(tool("calculator", { expression: "6*7" })),
    streamMode,
    onDisconnect: "cancel",
    checkpoint: await head(tid),
  }),
);
const values = first.filter((p) => p.event === "values").map((p) => p.data);
const last = values[values.length - 1].messages;
const finalAi = last[last.length - 1];
const chunks = first
  .filter((p) => p.event === "messages" && p.data[0].id === finalAi.id)
  .map((p) => p.data[0].content)
  .join("");

const asked = await collect(
  client.runs.stream(tid, "ostinato", {
    input: say(tool("shell", { command: "echo via-js" })),
    streamMode,
    checkpoint: await head(tid),
  }),
);
const interrupt = asked.find((p) => p.event === "updates" && p.data.__interrupt__)?.data
  .__interrupt__[0];
const state = await client.threads.getState(tid);
const resumed = await collect(
  client.runs.stream(tid, "ostinato", { command: { resume: true }, streamMode: ["values"] }),
);
const afterResume = resumed.filter((p) => p.event === "values").pop().data.messages;

const held = await collect(
  client.runs.stream(tid, "ostinato", {
    input: say(tool("shell", { command: "echo held" })),
    streamMode: ["updates"],
  }),
);
const heldId = held[0].data.run_id;
const heldBefore = (await client.runs.get(tid, heldId)).status;
await client.runs.cancel(tid, heldId);
const heldAfter = (await client.runs.get(tid, heldId)).status;

const again = await collect(
  client.runs.stream(tid, "ostinato", {
    input: say(tool("calculator", { expression: "2+2" })),
    streamMode: ["values"],
  }),
);
const runId = again[0].data.run_id;
const ids = again.filter((p) => p.event === "values" && p.id).map((p) => p.id);
const rejoined = await collect(
  client.runs.joinStream(tid, runId, { lastEventId: ids[0], streamMode: ["values"] }),
);

console.log(
  JSON.stringify({
    events: [...new Set(first.map((p) => p.event))],
    types: last.map((m) => m.type),
    final: finalAi.content,
    chunks,
    interrupt,
    stateInterrupts: state.interrupts,
    afterResume: afterResume.map((m) => m.content),
    heldBefore,
    heldAfter,
    threadStatus: (await client.threads.get(tid)).status,
    ids,
    rejoinedIds: rejoined.filter((p) => p.event === "values").map((p) => p.id),
  }),
);
