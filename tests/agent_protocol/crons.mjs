// The Agent Protocol's JavaScript client (@langchain/langgraph-sdk) keeping a cron on a
// thread (crons.createForThread set to fire two seconds on, search, count, update,
// delete) and refused a stateless one, against ostinato at argv[2]/langgraph.
// Prints one JSON object: what the test asserts on.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: `${process.argv[2]}/langgraph` });
const input = { messages: [{ type: "human", content: "good evening" }] };
const thread = await client.threads.create();
const tid = thread.thread_id;
const cron = await client.crons.createForThread(tid, "ostinato", {
  schedule: "in 2 seconds",
  input,
  metadata: { client: "js" },
});
let said = [];
for (let i = 0; i < 300 && said.length < 2; i++) {
  const state = await client.threads.getState(tid);
  said = state.values.messages.map((m) => [m.type, m.content]);
  if (said.length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
}
const found = await client.crons.search({ threadId: tid });
const count = await client.crons.count({ threadId: tid });
const updated = await client.crons.update(cron.cron_id, { schedule: "0 9 * * *", enabled: false });
await client.crons.delete(cron.cron_id);
const after = await client.crons.count();
let stateless = null;
try {
  await client.crons.create("ostinato", { schedule: "0 9 * * *", input });
} catch (error) {
  stateless = error.status ?? String(error);
}
console.log(
  JSON.stringify({
    tid,
    cron,
    said,
    found: found.map((c) => c.cron_id),
    count,
    updated,
    after,
    stateless,
  }),
);
