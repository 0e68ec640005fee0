// Builds the chat page into the Python package: src/ostinato/server/static/page/.
// `npm ci && npm run build` (in web/) is the whole build; .ci/run runs it and fails
// when the result differs from what is committed, so the committed files are always
// what these sources and the locked packages make.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "ostinato", "server", "static", "page");

const result = await build({
  entryPoints: [join(here, "src", "main.tsx")],
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022", "chrome111", "firefox115", "safari16"],
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "eof",
  charset: "utf8",
  write: false,
  outdir: "out",
  entryNames: "app",
  logLevel: "warning",
});

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const names = {};
for (const file of result.outputFiles) {
  const ext = file.path.endsWith(".css") ? "css" : "js";
  const hash = createHash("sha256").update(file.contents).digest("hex").slice(0, 10);
  names[ext] = `app-${hash}.${ext}`;
  writeFileSync(join(out, names[ext]), file.contents);
}
const html = readFileSync(join(here, "src", "index.html"), "utf8")
  .replace("{{css}}", `/assets/${names.css}`)
  .replace("{{js}}", `/assets/${names.js}`);
writeFileSync(join(out, "index.html"), html);
for (const [ext, name] of Object.entries(names)) console.log(`${ext}: ${name}`);
