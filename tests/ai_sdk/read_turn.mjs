// Reads ostinato's UI message stream with the AI SDK's own transport and reader, as
// useChat does: `node read_turn.mjs URL CHAT_ID TEXT [approve]`. Prints the UIMessage(s)
// it read as JSON, one a line. With "approve", an approval request in the first message
// is answered (addToolApprovalResponse's shape) and the continuation read too.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [url, chatId, text, mode] = process.argv.slice(2);
const transport = new DefaultChatTransport({ api: `${url}/v1/ai-sdk/chat` });

async function read(messages, continuing) {
  const stream = await transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  let last;
  for await (const message of readUIMessageStream({
    stream,
    message: continuing, // useChat continues the last assistant message
    terminateOnError: true,
  })) {
    last = message;
  }
  return last;
}

const user = { id: "u1", role: "user", parts: [{ type: "text", text }] };
const first = await read([user]);
console.log(JSON.stringify(first));
if (mode === "approve") {
  const parts = first.parts.map((part) =>
    part.state === "approval-requested"
      ? { ...part, state: "approval-responded", approval: { ...part.approval, approved: true } }
      : part,
  );
  const answered = { ...first, parts };
  const second = await read([user, answered], answered);
  console.log(JSON.stringify(second));
}
