// The composer: Enter sends, Shift+Enter adds a line; while a turn runs, Enter (or
// "After this answer") queues the message and Ctrl+Enter (or "Send now") steers it into
// the running turn before its next step; Stop (or Esc) cancels the running turn; files by the picker or dropped on the page; it says why it is disabled. It takes
// the keyboard focus whenever the person would type next (see `useFocusWhenFree`).
import { useEffect, useRef, useState } from "preact/hooks";

interface Props {
  running: boolean;
  disabledReason: string | null;
  hint: string | null;
  error: string | null;
  files: File[];
  onFiles: (files: File[]) => void;
  onSend: (text: string, steer?: boolean) => Promise<boolean>;
  onStop: () => void;
  /** A change (a card answered, an approval decided) asks for the focus again. */
  focusKey?: string;
}

/** Whether the focus is somewhere the person is busy: a card, or another text field. */
function busyElsewhere(box: HTMLElement): boolean {
  const active = document.activeElement as HTMLElement | null;
  if (!active || active === document.body || active === box) return false;
  return Boolean(active.closest(".card")) || /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
}

/** Focus the box when it appears, when it is enabled again, and when `key` changes,
 * unless the person is busy in a card or another field. */
function useFocusWhenFree(box: { current: HTMLTextAreaElement | null }, disabled: boolean, key: string) {
  useEffect(() => {
    const el = box.current;
    if (disabled || !el || busyElsewhere(el)) return;
    el.focus({ preventScroll: true });
  }, [disabled, key]);
}

export function Composer(props: Props) {
  const [text, setText] = useState("");
  const picker = useRef<HTMLInputElement>(null);
  const box = useRef<HTMLTextAreaElement>(null);
  const disabled = props.disabledReason !== null;
  useFocusWhenFree(box, disabled, props.focusKey ?? "");
  const send = async (steer = false) => {
    if (disabled || (!text.trim() && !props.files.length)) return;
    const sent = text;
    setText("");
    if (!(await props.onSend(sent, steer && props.running))) setText(sent);
  };
  const empty = !text.trim() && !props.files.length;
  const status = props.error ?? props.disabledReason ?? props.hint;
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      {props.files.length > 0 && (
        <ul class="files" aria-label="Files to send">
          {props.files.map((f, i) => (
            <li key={i}>
              {f.name}
              <button
                type="button"
                class="link"
                aria-label={`Remove ${f.name}`}
                onClick={() => props.onFiles(props.files.filter((_, j) => j !== i))}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <div class="composer-row">
        <button type="button" class="icon" aria-label="Attach files" disabled={disabled} onClick={() => picker.current?.click()}>
          <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
            <path d="M16.5 6.5 8.4 14.6a2 2 0 0 0 2.8 2.8l8.1-8.1a4 4 0 0 0-5.7-5.7L5.5 11.7a6 6 0 0 0 8.5 8.5l6.5-6.5" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" />
          </svg>
        </button>
        <input
          ref={picker}
          type="file"
          multiple
          hidden
          onChange={(e) => {
            const input = e.target as HTMLInputElement;
            props.onFiles([...props.files, ...Array.from(input.files ?? [])]);
            input.value = "";
          }}
        />
        <textarea
          ref={box}
          aria-label="Message"
          aria-describedby="composer-status"
          placeholder={
            disabled
              ? ""
              : props.running
                ? "Message (Enter: after this answer, Ctrl+Enter: send now)"
                : "Message (Enter sends, Shift+Enter adds a line)"
          }
          rows={1}
          value={text}
          disabled={disabled}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              send(e.ctrlKey || e.metaKey);
            }
          }}
        />
        {props.running && (
          <button type="button" class="danger" onClick={props.onStop}>
            Stop
          </button>
        )}
        {props.running && (
          <button
            type="button"
            title="Hand it to the running reply before its next step (Ctrl+Enter)"
            disabled={disabled || empty}
            onClick={() => send(true)}
          >
            Send now
          </button>
        )}
        <button
          type="submit"
          class="primary"
          title={props.running ? "Send it once the current reply is done (Enter)" : undefined}
          disabled={disabled || empty}
        >
          {props.running ? "After this answer" : "Send"}
        </button>
      </div>
      <p id="composer-status" class={props.error ? "composer-status error" : "composer-status"} aria-live="polite">
        {status ?? ""}
      </p>
    </form>
  );
}
