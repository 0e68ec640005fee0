// A conversation: its rows in order (the newest pages first on screen, older ones as
// the person scrolls up), the streaming draft, the cards that wait, the composer.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, api, startTurn } from "./api";
import { ApprovalCard, FormCard, QuestionCard } from "./cards";
import { Chat } from "./chat";
import { Composer } from "./composer";
import { newId, useChat } from "./hooks";
import { loadUpTo, reveal, seqInHash } from "./jump";
import { Live } from "./live";
import { navigate } from "./nav";
import { ModelPicker } from "./picker";
import { WaitingList } from "./waiting";
import { AssistantRow, DraftRow, PendingRow, StopNote, UserRow } from "./message";
import type { JsonObject, Row, SiblingRef, TurnRecord } from "./types";

const PAGE = 60; // items rendered at first; more as the person scrolls up
const FIRST_SEND_WAIT_MS = 3000; // at most, for the stream to open before the first send
const PLAIN_ENDS = new Set(["end_turn", "paused"]);

type Item =
  | { kind: "row"; row: Row; route: JsonObject | null; versions: SiblingRef[] | null }
  | { kind: "stop"; turn: TurnRecord }
  | { kind: "notice"; key: string; text: string; error: boolean };

function buildItems(chat: Chat): Item[] {
  const items: Item[] = [];
  const lastOfTurn = new Map<string, number>();
  const routes = new Map<string, JsonObject>();
  let notice = 0;
  const notices = [...chat.notices].sort((a, b) => a.seq - b.seq);
  let versions: SiblingRef[] | null = null; // a fork's versions, shown on the next row shown
  for (const seq of chat.order) {
    while (notice < notices.length && notices[notice].seq < seq) {
      const n = notices[notice++];
      items.push({ kind: "notice", key: `n${n.seq}-${notice}`, text: n.text, error: n.kind === "error" });
    }
    const row = chat.rows.get(seq)!;
    if (row.turn_id && row.role === "user" && row.metadata?.route) routes.set(row.turn_id, row.metadata.route as JsonObject);
    if (row.siblings) versions = row.siblings;
    if (row.hidden || (row.role !== "user" && row.role !== "assistant")) continue;
    items.push({ kind: "row", row, route: row.turn_id ? routes.get(row.turn_id) ?? null : null, versions });
    versions = null;
    if (row.turn_id) lastOfTurn.set(row.turn_id, items.length - 1);
  }
  for (; notice < notices.length; notice++) {
    const n = notices[notice];
    items.push({ kind: "notice", key: `n${n.seq}-${notice}`, text: n.text, error: n.kind === "error" });
  }
  const stops: Array<[number, TurnRecord]> = [];
  for (const [turnId, at] of lastOfTurn) {
    const turn = chat.turns.get(turnId);
    if (turn?.stop_reason && !PLAIN_ENDS.has(turn.stop_reason)) stops.push([at, turn]);
  }
  stops.sort((a, b) => b[0] - a[0]);
  for (const [at, turn] of stops) items.splice(at + 1, 0, { kind: "stop", turn });
  return items;
}

function lastTurnId(chat: Chat): string | null {
  for (let i = chat.order.length - 1; i >= 0; i--) {
    const row = chat.rows.get(chat.order[i])!;
    if (row.turn_id) return row.turn_id;
  }
  return null;
}

interface Props {
  id: string;
  showLookups: boolean;
  /** The new conversation's first message, if this view is the one to send it (once). */
  takeFirstMessage: () => { text: string; files: File[] } | null;
  onActivity: () => void;
}

export function ConversationView({ id, showLookups, takeFirstMessage, onActivity }: Props) {
  const chat = useMemo(() => new Chat(id), [id]);
  const version = useChat(chat);
  const [limit, setLimit] = useState(PAGE);
  const [files, setFiles] = useState<File[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const prevHeight = useRef<number | null>(null);

  const send = async (text: string, attached: File[] = files, steer = false): Promise<boolean> => {
    setError(null);
    const cid = newId();
    chat.pendingSends.push({ client_message_id: cid, text, files: attached.map((f) => f.name), queued: chat.state === "running", steer });
    chat.changed();
    stick.current = true;
    const body: Record<string, unknown> = { text: text.trim() || "(files attached)", client_message_id: cid };
    if (steer) body.policy = "steer";
    try {
      const first = await startTurn(id, body, attached);
      const pending = chat.pendingSends.find((p) => p.client_message_id === cid);
      if (pending && first === "input.queued") pending.queued = true;
      setFiles([]);
      chat.changed();
      return true;
    } catch (e) {
      chat.pendingSends = chat.pendingSends.filter((p) => p.client_message_id !== cid);
      chat.changed();
      setError(`Not sent: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
  };

  /** Start a turn another way: an edit of message `seq`, or a new answer in place of
   * answer `seq` (each on a new branch; its frames come on the stream). */
  const branch = async (path: string, body: Record<string, unknown>): Promise<boolean> => {
    setError(null);
    stick.current = true;
    try {
      await startTurn(id, body, [], path);
      return true;
    } catch (e) {
      setError(`Not sent: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
  };
  const edit = (seq: number, text: string) => branch(`messages/${seq}/edit`, { text, client_message_id: newId() });
  const regenerate = (seq: number) => void branch(`messages/${seq}/regenerate`, {});
  const switchTo = (leaf: number) => {
    setError(null);
    // the stream's branch.changed shows the branch (here and in every other tab)
    api.switchBranch(id, leaf).catch((e) => setError(`Could not switch: ${e.message}`));
  };
  const idle = chat.state !== "running" && chat.loaded;

  const stop = () => {
    api.cancel(id).catch((e) => {
      if (!(e instanceof ApiError && e.status === 409)) setError(`Could not stop: ${e.message}`);
    });
  };

  useEffect(() => {
    const live = new Live(chat);
    const firstMessage = takeFirstMessage();
    let gone = false;
    chat
      .load()
      .then(() => {
        // the new conversation's first message, once its stream is open (live.ts); sent
        // even if the person has left the view meanwhile (then at once: no stream here)
        if (gone) {
          if (firstMessage) send(firstMessage.text, firstMessage.files);
          return;
        }
        live.start();
        if (firstMessage) {
          live.openedWithin(FIRST_SEND_WAIT_MS).then(() => send(firstMessage.text, firstMessage.files));
        }
      })
      .catch((e) => {
        chat.missing = e instanceof ApiError && e.status === 404;
        setError(chat.missing ? "There is no such conversation." : `Could not load: ${e.message}`);
        chat.changed();
      });
    return () => {
      gone = true;
      live.stop();
    };
  }, [chat]);

  const state = chat.state;
  const lastState = useRef(state);
  useEffect(() => {
    // a turn ended here: the list shows its new title and order (not at first: the list
    // was just read)
    if (lastState.current !== state && state !== "running") onActivity();
    lastState.current = state;
  }, [state]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape" && chat.state === "running") {
        e.preventDefault();
        stop();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [chat]);

  const items = useMemo(() => buildItems(chat), [version]);
  const shown = items.slice(Math.max(0, items.length - limit));
  const latestTurn = lastTurnId(chat);
  const card = chat.waitingCard();
  const approvals = [...chat.approvals.values()];

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (prevHeight.current !== null) {
      el.scrollTop += el.scrollHeight - prevHeight.current; // older items were added above
      prevHeight.current = null;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
  });
  useEffect(() => chat.subscribe(() => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, true), [chat]);

  // a search hit opens the conversation at its row: read up to it, show it, scroll to it
  const [target, setTarget] = useState<number | null>(seqInHash());
  useEffect(() => {
    const onPop = () => setTarget(seqInHash());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);
  useEffect(() => {
    if (target === null || !chat.loaded) return;
    loadUpTo(chat, target).then((held) => {
      if (!held) return;
      const at = buildItems(chat).findIndex((i) => i.kind === "row" && i.row.seq >= target);
      if (at >= 0) setLimit((n) => Math.max(n, buildItems(chat).length - at));
      stick.current = false;
      chat.changed();
    });
  }, [target, chat.loaded]);
  useLayoutEffect(() => {
    if (target !== null && reveal(scroller.current, target)) setTarget(null);
  });

  const hasOlder = items.length > limit || chat.olderBefore !== null;
  const older = () => {
    if (items.length > limit) {
      prevHeight.current = scroller.current?.scrollHeight ?? null;
      setLimit(limit + PAGE);
      return;
    }
    chat.loadOlder().then(
      (loaded) => {
        if (!loaded) return;
        prevHeight.current = scroller.current?.scrollHeight ?? null;
        setLimit((n) => n + PAGE);
      },
      (e) => setError(`Could not load older messages: ${e.message}`),
    );
  };

  const disabledReason = !chat.loaded
    ? chat.missing ? "This conversation does not exist." : "Loading the conversation…"
    : !chat.connected ? "Reconnecting to the server…" : null;
  const hint = card
    ? "A question waits above: answer it, or type to move on without answering."
    : approvals.length
      ? "A tool call waits for your approval above; sending a message declines it."
      : chat.queuedElsewhere.size
        ? `${chat.queuedElsewhere.size} message(s) from elsewhere wait to run.`
        : null;

  if (chat.missing) {
    return (
      <section class="conversation missing" aria-label="Conversation">
        <div class="welcome" role="alert">
          <h1>No such conversation</h1>
          <p>There is no conversation <code>{id}</code> here (or it is not yours).</p>
          <p>
            <a href="/" onClick={(e) => { e.preventDefault(); navigate("/"); }}>Start a new conversation</a>
            {" "}or pick one from the list.
          </p>
        </div>
      </section>
    );
  }
  return (
    <section
      class={dragging ? "conversation dragging" : "conversation"}
      aria-label="Conversation"
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        const dropped = Array.from(e.dataTransfer?.files ?? []);
        if (dropped.length) setFiles([...files, ...dropped]);
      }}
    >
      <div
        class="scroller"
        ref={scroller}
        onScroll={(e) => {
          const el = e.currentTarget as HTMLDivElement;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
          if (el.scrollTop < 200 && hasOlder) older();
        }}
      >
        <div class="messages" role="log" aria-live="polite" aria-relevant="additions">
          {hasOlder && (
            <button class="link earlier" onClick={older}>
              Show earlier messages
            </button>
          )}
          {chat.loaded && !items.length && !chat.pendingSends.length && (
            <p class="empty">Nothing here yet. Say something below.</p>
          )}
          {shown.map((item) =>
            item.kind === "row" ? (
              item.row.role === "user" ? (
                <UserRow
                  key={item.row.seq}
                  row={item.row}
                  versions={item.versions}
                  idle={idle}
                  onSwitch={switchTo}
                  onEdit={edit}
                />
              ) : (
                <AssistantRow
                  key={item.row.seq}
                  chat={chat}
                  row={item.row}
                  route={item.route}
                  showLookups={showLookups}
                  latest={item.row.turn_id === latestTurn}
                  version={version}
                  onSend={(t) => send(t, [])}
                  versions={item.versions}
                  idle={idle}
                  onSwitch={switchTo}
                  onRegenerate={regenerate}
                />
              )
            ) : item.kind === "stop" ? (
              <StopNote key={`stop-${item.turn.id}`} turn={item.turn} />
            ) : (
              <p key={item.key} class={item.error ? "note error" : "note"} role={item.error ? "alert" : "note"}>
                {item.text}
              </p>
            ),
          )}
          <DraftRow chat={chat} />
          {chat.retrying && (
            <p class="note retrying" role="status">
              The provider is busy ({chat.retrying.error}); retrying in {Math.max(1, Math.round(chat.retrying.delay_s))} s
              (attempt {chat.retrying.attempt}).
            </p>
          )}
          {chat.state === "running" && !chat.draft && !approvals.length && <p class="note working" role="status">Working…</p>}
          {chat.pendingSends
            .filter((p) => !chat.waiting.some((q) => q.client_message_id === p.client_message_id))
            .map((p) => (
              <PendingRow key={p.client_message_id} send={p} />
            ))}
        </div>
        <div class="cards">
          {approvals.map((a) => (
            <ApprovalCard key={a.id} chat={chat} approval={a} />
          ))}
          {card &&
            (card.name === "ask_form" ? (
              <FormCard key={card.id} chat={chat} id={card.id} name={card.name} input={card.input} />
            ) : (
              <QuestionCard key={card.id} chat={chat} id={card.id} name={card.name} input={card.input} />
            ))}
        </div>
      </div>
      <WaitingList chat={chat} />
      <ModelPicker id={id} />
      <Composer
        running={chat.state === "running"}
        disabledReason={disabledReason}
        hint={hint}
        error={error}
        files={files}
        onFiles={setFiles}
        onSend={(t, steer) => send(t, files, steer)}
        onStop={stop}
        focusKey={[card?.id ?? "", ...approvals.map((a) => a.id)].join(" ")}
      />
    </section>
  );
}
