// Today's spend against the caller's limit, in the top bar (GET /v1/usage for today, read
// again on every activity). A cost that includes a call to a model with no price is shown
// as unknown, never as zero.
import { useEffect, useState } from "preact/hooks";
import { api } from "./api";
import type { Usage } from "./types";

function money(amount: number, currency: string): string {
  const text = amount === 0 || Math.abs(amount) >= 0.01 ? amount.toFixed(2) : amount.toFixed(4);
  return currency === "USD" ? `$${text}` : `${text} ${currency}`;
}

export function describe(usage: Usage): { text: string; title: string; over: boolean } {
  const { currency, total } = usage;
  const own = usage.budgets.find((b) => b.applies_to === "owner" && b.period === "day");
  const spent = own ? own.spent_usd + own.reserved_usd : total.priced_cost_usd;
  const known = total.cost_usd !== null || own !== undefined;
  let text = `Today ${known ? money(spent, currency) : "unknown"}`;
  let title = `${total.calls} model calls today`;
  if (total.unpriced_calls) title += `; ${total.unpriced_calls} to a model with no price`;
  let over = false;
  if (own) {
    const limit = own.hard_usd ?? own.soft_usd;
    if (limit !== null) text += ` of ${money(limit, currency)}`;
    over = own.soft_usd !== null && spent > own.soft_usd;
    title += `; resets ${new Date(own.resets_at).toLocaleString()}`;
  }
  return { text, title, over };
}

export function Spend({ version }: { version: number }) {
  const [usage, setUsage] = useState<Usage | null>(null);
  useEffect(() => {
    let live = true;
    const today = new Date().toISOString().slice(0, 10);
    api.usageOn(today).then(
      (found) => live && setUsage(found),
      () => live && setUsage(null), // usage is a nicety: the page works without it
    );
    return () => {
      live = false;
    };
  }, [version]);
  if (!usage) return null;
  const { text, title, over } = describe(usage);
  return (
    <span class={over ? "spend over" : "spend"} title={title} aria-label="Spend today">
      {text}
    </span>
  );
}
