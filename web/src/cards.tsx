// Cards: what waits for a person. Approvals (a tool call that needs consent) and question
// cards (`ask_user`, `choose`, `ask_form`) are rows and pending approvals on the server,
// so they come back after a reload, in every tab and after a restart; answering in one
// tab closes them in the others (an `approval.decided` frame, or the answer's row).
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, api, startTurn } from "./api";
import type { Chat } from "./chat";
import { pretty } from "./hooks";
import type { Approval, Json, JsonObject } from "./types";

function useFocusOnMount<T extends HTMLElement>() {
  const ref = useRef<T>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "nearest" });
  }, []);
  return ref;
}

function Problem({ text }: { text: string | null }) {
  return text ? <p class="card-error" role="alert">{text}</p> : null;
}

function useDecision(chat: Chat, approval: Approval) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const decide = async (decision: "approve" | "decline", remember: string) => {
    setBusy(true);
    setError(null);
    try {
      await api.decide(chat.id, approval.id, decision, remember);
      chat.markDecided(approval.id);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 409 || e.status === 404)) {
        chat.markDecided(approval.id); // decided elsewhere (another tab, a timeout)
      } else {
        setError(e instanceof Error ? e.message : String(e));
        setBusy(false);
      }
    }
  };
  return { busy, error, decide };
}

// A soft spend limit asks before the next model call: an approval of "spend" whose
// arguments are the card (its question and figures). Continuing covers the rest of the
// period (the server keeps a grant); stopping ends the turn.
function SpendCard({ chat, approval }: { chat: Chat; approval: Approval }) {
  const ref = useFocusOnMount<HTMLElement>();
  const { busy, error, decide } = useDecision(chat, approval);
  const question = String(approval.arguments.question ?? "This step goes past a spending limit.");
  return (
    <section ref={ref} tabIndex={-1} class="card approval spend" aria-label="Spending limit" data-approval={approval.id}>
      <h2 class="card-title">Spending limit</h2>
      <p class="card-question">{question}</p>
      <div class="card-actions">
        <button class="primary" disabled={busy} onClick={() => decide("approve", "none")}>
          Continue
        </button>
        <button class="danger" disabled={busy} onClick={() => decide("decline", "none")}>
          Stop here
        </button>
      </div>
      <Problem text={error} />
    </section>
  );
}

export function ApprovalCard({ chat, approval }: { chat: Chat; approval: Approval }) {
  if (approval.tool === "spend") return <SpendCard chat={chat} approval={approval} />;
  return <ToolApprovalCard chat={chat} approval={approval} />;
}

function ToolApprovalCard({ chat, approval }: { chat: Chat; approval: Approval }) {
  const ref = useFocusOnMount<HTMLElement>();
  const { busy, error, decide } = useDecision(chat, approval);
  const remember = approval.family ? "family" : "exact";
  const rememberHint = approval.family
    ? `Also allow every “${approval.family}” call of ${approval.tool} from now on`
    : `Also allow this exact call from now on`;
  return (
    <section
      ref={ref}
      tabIndex={-1}
      class="card approval"
      aria-label={`Approval needed: ${approval.tool}`}
      data-approval={approval.id}
    >
      <h2 class="card-title">
        Allow <code>{approval.tool}</code>? <span class={`risk risk-${approval.risk}`}>{approval.risk}</span>
      </h2>
      <pre class="card-args">{pretty(approval.arguments)}</pre>
      <div class="card-actions">
        <button class="primary" disabled={busy} onClick={() => decide("approve", "none")}>
          Approve
        </button>
        <button disabled={busy} title={rememberHint} onClick={() => decide("approve", remember)}>
          Approve and remember
        </button>
        <button class="danger" disabled={busy} onClick={() => decide("decline", "none")}>
          Decline
        </button>
      </div>
      <Problem text={error} />
    </section>
  );
}

interface Option { id: string; label: string; description?: string }

export function options(raw: Json | undefined): Option[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((o, i) =>
    typeof o === "object" && o !== null && !Array.isArray(o)
      ? {
          id: String(o.id ?? i),
          label: String(o.label ?? o.id ?? ""),
          description: o.description ? String(o.description) : undefined,
        }
      : { id: String(o), label: String(o) },
  );
}

interface CardProps { chat: Chat; id: string; name: string; input: JsonObject }

function useAnswer(chat: Chat, toolUseId: string) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const answer = async (result: Json) => {
    setBusy(true);
    setError(null);
    try {
      await startTurn(chat.id, { tool_response: { tool_use_id: toolUseId, result } });
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  return { busy, error, answer };
}

/** One question: pick one option, several, or write an answer. */
function Question(props: {
  question: string;
  opts: Option[];
  multiple: boolean;
  busy: boolean;
  submitLabel: string;
  onAnswer: (value: Json) => void;
  byLabel?: boolean;
}) {
  const { opts, multiple, busy, onAnswer } = props;
  const [picked, setPicked] = useState<string[]>([]);
  const [text, setText] = useState("");
  const value = (o: Option) => (props.byLabel ? o.label : o.id);
  if (opts.length && !multiple) {
    return (
      <div class="card-options" role="group" aria-label={props.question}>
        {opts.map((o) => (
          <button key={o.id} disabled={busy} onClick={() => onAnswer(value(o))} title={o.description}>
            {o.label}
          </button>
        ))}
      </div>
    );
  }
  if (opts.length) {
    const toggle = (id: string) =>
      setPicked((p) => (p.includes(id) ? p.filter((x) => x !== id) : [...p, id]));
    return (
      <div>
        <fieldset class="card-checks">
          <legend class="sr-only">{props.question}</legend>
          {opts.map((o) => (
            <label key={o.id}>
              <input type="checkbox" checked={picked.includes(o.id)} onChange={() => toggle(o.id)} />
              {o.label}
            </label>
          ))}
        </fieldset>
        <button
          class="primary"
          disabled={busy || !picked.length}
          onClick={() => onAnswer(opts.filter((o) => picked.includes(o.id)).map(value))}
        >
          {props.submitLabel}
        </button>
      </div>
    );
  }
  return (
    <form
      class="card-text"
      onSubmit={(e) => {
        e.preventDefault();
        if (text.trim()) onAnswer(text.trim());
      }}
    >
      <input
        type="text"
        aria-label={`Answer: ${props.question}`}
        value={text}
        onInput={(e) => setText((e.target as HTMLInputElement).value)}
      />
      <button class="primary" disabled={busy || !text.trim()}>
        {props.submitLabel}
      </button>
    </form>
  );
}

export function QuestionCard({ chat, id, name, input }: CardProps) {
  const ref = useFocusOnMount<HTMLElement>();
  const { busy, error, answer } = useAnswer(chat, id);
  const question = String(input.question ?? "");
  const carriesData = name === "choose";
  const submit = (value: Json) =>
    answer(carriesData ? (Array.isArray(value) ? { ids: value } : { id: value }) : value);
  return (
    <section ref={ref} tabIndex={-1} class="card question" aria-label={`Question: ${question}`} data-card={id}>
      <h2 class="card-title">{question}</h2>
      <Question
        question={question}
        opts={options(input.options)}
        multiple={Boolean(input.multiple)}
        busy={busy}
        submitLabel="Answer"
        onAnswer={submit}
        byLabel={!carriesData}
      />
      <Problem text={error} />
    </section>
  );
}

/** `ask_form`: several questions, one step each, answered together. */
export function FormCard({ chat, id, input }: CardProps) {
  const ref = useFocusOnMount<HTMLElement>();
  const { busy, error, answer } = useAnswer(chat, id);
  const questions = Array.isArray(input.questions) ? (input.questions as JsonObject[]) : [];
  const [step, setStep] = useState(0);
  const [answers, setAnswers] = useState<Record<string, Json>>({});
  const current = questions[step];
  if (!current) return null;
  const title = String(input.title ?? "A few questions");
  const qid = String(current.id ?? step);
  const last = step === questions.length - 1;
  const onAnswer = (value: Json) => {
    const next = { ...answers, [qid]: value };
    setAnswers(next);
    if (last) answer({ answers: next });
    else setStep(step + 1);
  };
  return (
    <section ref={ref} tabIndex={-1} class="card question form" aria-label={title} data-card={id}>
      <h2 class="card-title">{title}</h2>
      <p class="card-step">
        Step {step + 1} of {questions.length}
      </p>
      <p class="card-question">{String(current.question ?? "")}</p>
      <Question
        key={qid}
        question={String(current.question ?? "")}
        opts={options(current.options)}
        multiple={Boolean(current.multiple)}
        busy={busy}
        submitLabel={last ? "Submit" : "Next"}
        onAnswer={onAnswer}
      />
      {step > 0 && (
        <button class="link" disabled={busy} onClick={() => setStep(step - 1)}>
          Back
        </button>
      )}
      <Problem text={error} />
    </section>
  );
}

/** `suggest_replies`: chips under the reply; a click sends that reply. */
export function Suggestions({ replies, onSend }: { replies: string[]; onSend: (text: string) => void }) {
  return (
    <div class="chips" role="group" aria-label="Suggested replies">
      {replies.map((r) => (
        <button key={r} class="chip" onClick={() => onSend(r)}>
          {r}
        </button>
      ))}
    </div>
  );
}
