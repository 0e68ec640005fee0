// Runs an ostinato agent with the official AG-UI client (@ag-ui/client's HttpAgent), and
// prints one JSON line per run: the events it received, the messages the client built,
// and the interrupts left pending. With "approve" (or "answer=TEXT"), a run that ends
// on an interrupt is resumed the AG-UI way (runAgent({resume})) and printed too.
// Usage: node run_agent.mjs URL KEY THREAD_ID TEXT [approve|answer=TEXT]
import { HttpAgent } from "@ag-ui/client";

const [url, key, threadId, text, mode] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${url}/v1/ag-ui`,
  headers: { authorization: `Bearer ${key}` },
  threadId,
  initialMessages: [{ id: "user-1", role: "user", content: text }],
});

async function run(parameters) {
  const events = [];
  await agent.runAgent(parameters, { onEvent: ({ event }) => { events.push(event); } });
  const pending = agent.pendingInterrupts.map((i) => ({ ...i }));
  console.log(JSON.stringify({ events, messages: agent.messages, pending }));
  return pending;
}

const pending = await run({});
if (pending.length > 0 && mode) {
  const payload = mode === "approve" ? { approved: true } : { answer: mode.slice("answer=".length) };
  await run({ resume: pending.map((i) => ({ interruptId: i.id, status: "resolved", payload })) });
}
