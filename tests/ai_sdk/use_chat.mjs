// What `useChat` does, without React: the `ai` package's own AbstractChat (the class
// @ai-sdk/react's Chat extends) over a plain state, with the `sendAutomaticallyWhen` that
// docs/clients.md shows. `node use_chat.mjs PACKAGE URL CHAT_ID TEXT [answer JSON]`
// (PACKAGE: `ai` or an alias of another version, e.g. `ai6`). It sends TEXT; with an
// answer, it answers the question card that waits with `addToolOutput` and does nothing
// more (the snippet is to send it). Prints the chat's messages as JSON when it is idle.
const [pkg, url, chatId, text, answer] = process.argv.slice(2);
const {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} = await import(pkg);

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

let requests = 0;
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${url}/v1/ai-sdk/chat`,
    fetch: (input, init) => {
      requests++;
      return fetch(input, init);
    },
  }),
  // docs/clients.md, as written there
  sendAutomaticallyWhen: (chat) =>
    lastAssistantMessageIsCompleteWithApprovalResponses(chat) ||
    lastAssistantMessageIsCompleteWithToolCalls(chat),
});

async function idle() {
  // settled: not streaming, and no automatic request about to start
  for (let quiet = 0; quiet < 20; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    quiet = chat.status === "ready" || chat.status === "error" ? quiet + 1 : 0;
  }
}

await chat.sendMessage({ text });
await idle();
if (answer !== undefined) {
  const last = chat.messages[chat.messages.length - 1];
  const card = last.parts.find((p) => p.type === "dynamic-tool" && p.state === "input-available");
  if (!card) throw new Error(`no card waits: ${JSON.stringify(last.parts)}`);
  await chat.addToolOutput({ tool: card.toolName, toolCallId: card.toolCallId, output: JSON.parse(answer) });
  await idle();
}
if (chat.error) throw chat.error;
console.log(JSON.stringify({ requests, status: chat.status, messages: chat.messages }));
