// The openai npm package against ostinato: `node openai_chat.mjs URL KEY`. Holds a
// conversation of two messages through one conversation id (the second streamed) and
// prints what came back as JSON.
import OpenAI from "openai";

const [url, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const first = await client.chat.completions
  .create({ model: "ostinato", messages: [{ role: "user", content: "hello" }] })
  .withResponse();
const conversationId = first.response.headers.get("x-ostinato-conversation-id");
const messages = [
  { role: "user", content: "hello" },
  { role: "assistant", content: first.data.choices[0].message.content },
  { role: "user", content: '/tool calculator {"expression": "6*7"}' },
];
const stream = await client.chat.completions.create({
  model: "ostinato",
  messages,
  stream: true,
  stream_options: { include_usage: true },
  conversation_id: conversationId,
});
let text = "";
let usage = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? "";
  usage = chunk.usage ?? usage;
}
console.log(JSON.stringify({ conversationId, first: first.data.choices[0].message.content, text, usage }));
