// The conversation as a tree through `useChat`'s own machinery (the `ai` package's
// AbstractChat, as use_chat.mjs runs it): `node tree_chat.mjs PACKAGE URL CHAT_ID FIRST
// EDITED` sends FIRST, asks for its answer again with `regenerate()`, then edits FIRST
// into EDITED with `sendMessage({text, messageId})`. Prints, as JSON, the chat's
// messages after each step.
const [pkg, url, chatId, first, edited] = process.argv.slice(2);
const { AbstractChat, DefaultChatTransport } = await import(pkg);

class State {
  status = "ready";
  error = undefined;
  messages = [];
  pushMessage = (m) => (this.messages = [...this.messages, m]);
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (i, m) => (this.messages = this.messages.map((old, j) => (j === i ? m : old)));
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

const chat = new Chat({ id: chatId, transport: new DefaultChatTransport({ api: `${url}/v1/ai-sdk/chat` }) });
const steps = {};
const seen = () => chat.messages.map((m) => ({
  id: m.id,
  role: m.role,
  text: m.parts.filter((p) => p.type === "text").map((p) => p.text).join(""),
}));

await chat.sendMessage({ text: first });
steps.sent = seen();
await chat.regenerate();
steps.regenerated = seen();
await chat.sendMessage({ text: edited, messageId: chat.messages[0].id });
steps.edited = seen();
if (chat.error) throw chat.error;
console.log(JSON.stringify(steps));
