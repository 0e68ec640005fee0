// Which model or agent answers this conversation: the choices `GET /v1/models` marks
// `choosable` for this caller (agents by their persona, models by id), set with
// `PATCH /v1/conversations/{id}` (`persona` or `model`; the default clears both).
import { useEffect, useState } from "preact/hooks";
import { api } from "./api";

interface Choice {
  value: string; // "persona:<name>" or "model:<id>"
  label: string;
  group: "Agents" | "Models";
}

function choicesOf(models: Awaited<ReturnType<typeof api.models>>): Choice[] {
  const out: Choice[] = [];
  for (const m of models.data) {
    const extra = m.ostinato ?? {};
    if (extra.choosable === false) continue;
    if (extra.agent) {
      if (typeof extra.persona === "string" && extra.persona) {
        out.push({ value: `persona:${extra.persona}`, label: `${m.id} (${extra.persona})`, group: "Agents" });
      }
    } else {
      const tiers = Array.isArray(extra.tiers) && extra.tiers.length ? ` · ${extra.tiers.join(", ")}` : "";
      out.push({ value: `model:${m.id}`, label: `${m.id}${tiers}`, group: "Models" });
    }
  }
  return out;
}

export function ModelPicker({ id }: { id: string }) {
  const [choices, setChoices] = useState<Choice[]>([]);
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    Promise.all([api.models(), api.conversation(id)]).then(
      ([models, conversation]) => {
        setChoices(choicesOf(models));
        const model = conversation.metadata?.model;
        setValue(conversation.persona ? `persona:${conversation.persona}` : typeof model === "string" ? `model:${model}` : "");
      },
      () => setChoices([]),
    );
  }, [id]);
  if (!choices.length) return null;
  const known = value === "" || choices.some((c) => c.value === value);
  const choose = async (next: string) => {
    const [kind, name] = [next.split(":", 1)[0], next.slice(next.indexOf(":") + 1)];
    const body = next === "" ? { persona: null, model: null } : kind === "persona" ? { persona: name, model: null } : { model: name, persona: null };
    try {
      await api.update(id, body);
      setValue(next);
      setError(null);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  return (
    <div class="picker">
      <label>
        Answers with{" "}
        <select aria-label="Model or agent" value={value} onChange={(e) => choose((e.target as HTMLSelectElement).value)}>
          <option value="">the default</option>
          {!known && <option value={value}>{value.slice(value.indexOf(":") + 1)}</option>}
          {(["Agents", "Models"] as const).map((group) => {
            const inGroup = choices.filter((c) => c.group === group);
            return inGroup.length ? (
              <optgroup key={group} label={group}>
                {inGroup.map((c) => (
                  <option key={c.value} value={c.value}>{c.label}</option>
                ))}
              </optgroup>
            ) : null;
          })}
        </select>
      </label>
      {error && <span class="card-error" role="alert">{error}</span>}
    </div>
  );
}
