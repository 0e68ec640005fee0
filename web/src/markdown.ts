// Markdown to safe HTML: `marked` renders, DOMPurify removes anything that could run
// (event handlers, scripts, javascript: and other non-web links, forms, inline styles).
// The page's Content-Security-Policy is a second wall behind it.
import DOMPurify from "dompurify";
import { Marked } from "marked";

const marked = new Marked({ gfm: true, breaks: false, async: false });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") ?? "";
    if (!/^(https?:|mailto:|#|\/)/i.test(href)) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") ?? "";
    if (!/^(https?:|data:image\/(png|jpeg|gif|webp);)/i.test(src)) node.removeAttribute("src");
    node.setAttribute("loading", "lazy");
  }
});

const PURIFY = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style", "srcset", "action", "formaction"],
  ALLOW_DATA_ATTR: false,
};

const cache = new Map<string, string>();
const CACHE_SIZE = 4000;

/** Safe HTML for `text`; kept for next time unless `keep` is false (a streaming draft:
 * each frame's text is new, and keeping them all would only feed the garbage collector). */
export function renderMarkdown(text: string, keep = true): string {
  const hit = cache.get(text);
  if (hit !== undefined) return hit;
  const html = DOMPurify.sanitize(marked.parse(text) as string, PURIFY) as string;
  if (!keep) return html;
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  cache.set(text, html);
  return html;
}
