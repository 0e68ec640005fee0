// `show`: a table or a simple chart drawn by the page from data in a declared JSON
// shape (see ostinato.tools.cards). Every value is shown as text or used as a number:
// nothing the model writes is ever run as HTML or script.
import type { Json, JsonObject } from "./types";

const cell = (v: Json) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

function Table({ table }: { table: JsonObject }) {
  const columns = Array.isArray(table.columns) ? table.columns.map(cell) : [];
  const rows = Array.isArray(table.rows) ? (table.rows as Json[]) : [];
  return (
    <div class="show-table">
      <table>
        <thead>
          <tr>
            {columns.map((c, i) => (
              <th key={i} scope="col">{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i}>
              {(Array.isArray(r) ? r : [r]).map((v, j) => (
                <td key={j}>{cell(v)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const W = 480;
const H = 200;
const PAD = 28;

function Chart({ chart }: { chart: JsonObject }) {
  const labels = Array.isArray(chart.labels) ? chart.labels.map(cell) : [];
  const series = (Array.isArray(chart.series) ? chart.series : []) as JsonObject[];
  const values = series.map((s) => (Array.isArray(s.values) ? s.values.map((v) => (typeof v === "number" && isFinite(v) ? v : 0)) : []));
  const max = Math.max(0, ...values.flat());
  const min = Math.min(0, ...values.flat());
  const span = max - min || 1;
  const y = (v: number) => H - PAD - ((v - min) / span) * (H - 2 * PAD);
  const n = Math.max(1, labels.length, ...values.map((v) => v.length));
  const band = (W - 2 * PAD) / n;
  const kind = chart.type === "line" ? "line" : "bar";
  const name = (i: number) => cell(series[i]?.name ?? `series ${i + 1}`);
  const summary = series.map((_, i) => `${name(i)}: ${values[i].join(", ")}`).join("; ");
  return (
    <figure class="show-chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${kind} chart. ${summary}`}>
        <line class="axis" x1={PAD} y1={y(0)} x2={W - PAD} y2={y(0)} />
        {values.map((vals, si) =>
          kind === "bar" ? (
            vals.map((v, i) => {
              const w = band / (values.length + 1);
              const x = PAD + i * band + w * (si + 0.5);
              return <rect key={`${si}-${i}`} class={`s${si % 6}`} x={x} width={w} y={Math.min(y(v), y(0))} height={Math.abs(y(v) - y(0))} />;
            })
          ) : (
            <polyline key={si} class={`line s${si % 6}`} points={vals.map((v, i) => `${PAD + (i + 0.5) * band},${y(v)}`).join(" ")} />
          ),
        )}
        {labels.map((l, i) => (
          <text key={i} x={PAD + (i + 0.5) * band} y={H - 8} text-anchor="middle">
            {l}
          </text>
        ))}
      </svg>
      {series.length > 1 && (
        <figcaption class="legend">
          {series.map((_, i) => (
            <span key={i} class={`key s${i % 6}`}>{name(i)}</span>
          ))}
        </figcaption>
      )}
    </figure>
  );
}

export function Show({ input }: { input: JsonObject }) {
  const title = input.title ? String(input.title) : null;
  return (
    <section class="show" aria-label={title ?? "Data"}>
      {title && <h3 class="show-title">{title}</h3>}
      {input.table && typeof input.table === "object" && !Array.isArray(input.table) && <Table table={input.table} />}
      {input.chart && typeof input.chart === "object" && !Array.isArray(input.chart) && <Chart chart={input.chart} />}
    </section>
  );
}
