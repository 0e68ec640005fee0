"""The chat page in Chromium: time to the first usable screen (an empty conversation, a
2,000-message one and a 10,000-message one), how late a streamed delta is painted while
1,000 deltas arrive per second, and the bytes shipped.

    python bench/web.py

Needs Debian's Chromium (/usr/bin/chromium) and the playwright package (dev extras).
"Usable" is the moment the message box is enabled and the conversation's newest row is
on screen, read as ``performance.now()`` (milliseconds since the navigation began).
A delta's delay is from its arrival on the EventSource to the end of the next animation
frame after it (a task posted from that frame's callback). Targets (issue 12): first
screen < 300 ms, long conversation < 500 ms, no delta painted later than 50 ms, < 150 KB
of script compressed.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e import fake_model
from tests.web.provider import PageChat
from tests.web.site import CHROMIUM, CHROMIUM_ARGS, Site, fill

RUNS = 10
LAST = "message 1999:"
LONGEST = 10_000  # issue 28: the time to open a 10,000-message conversation
DELTAS = 3_000  # at 1,000 a second

PROBE = """
window.__late = [];
const Original = window.EventSource;
window.EventSource = class extends Original {
  constructor(...args) {
    super(...args);
    super.addEventListener("text.delta", () => {
      const arrived = performance.now();
      requestAnimationFrame(() => {
        const channel = new MessageChannel();
        channel.port1.onmessage = () => window.__late.push(performance.now() - arrived);
        channel.port2.postMessage(0);
      });
    });
  }
};
"""

USABLE = """(text) => {
  const box = document.querySelector('textarea[aria-label="Message"]');
  if (!box || box.disabled) return false;
  return text ? document.body.innerText.includes(text) : !!document.querySelector('.empty');
}"""


def first_screen(browser: object, url: str, text: str | None) -> list[float]:
    samples = []
    for _ in range(RUNS):
        context = browser.new_context()  # type: ignore[attr-defined]
        page = context.new_page()
        page.goto(url)
        page.wait_for_function(USABLE, arg=text, polling="raf", timeout=30_000)
        samples.append(page.evaluate("performance.now()"))
        context.close()
    return samples


def shipped(browser: object, url: str) -> tuple[int, int]:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(USABLE, arg=None, timeout=30_000)
    entries = page.evaluate(
        "performance.getEntriesByType('navigation').concat(performance.getEntriesByType"
        "('resource')).map(e => [e.name, e.transferSize, e.encodedBodySize])"
    )
    context.close()
    total = sum(int(e[1]) for e in entries)
    script = sum(int(e[2]) for e in entries if str(e[0]).endswith(".js"))
    return total, script


def bytes_line(browser: object, url: str) -> str:
    total, script = shipped(browser, url)
    return f"{'bytes shipped (compressed)':<44} {total:,} B, of which script {script:,} B"


def streaming(browser: object, site: Site) -> list[float]:
    cid = site.conversation("stream")
    context = browser.new_context()  # type: ignore[attr-defined]
    context.add_init_script(PROBE)
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    page.wait_for_function(USABLE, arg=None, timeout=30_000)
    box = page.get_by_role("textbox", name="Message")
    box.fill(f"/slow {DELTAS}")
    box.press("Enter")
    page.wait_for_function(
        f"() => document.body.innerText.includes('w{DELTAS - 1}')", timeout=120_000
    )
    late: list[float] = page.evaluate("window.__late")
    context.close()
    return late


def line(name: str, samples: list[float], unit: str = "ms") -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"{name:<44} median {statistics.median(samples):7.1f} {unit}   p95 {p95:7.1f} {unit}"
        f"   max {max(samples):7.1f} {unit}   (n={len(samples)})"
    )


def late(samples: list[float]) -> str:
    over = sum(1 for s in samples if s > 50)
    return line(f"delta arrival to paint, {DELTAS:,} at 1,000/s", samples) + f"   >50 ms: {over}"


def measure(name: str, figure: Callable[[], str]) -> None:
    """Print one figure; a figure that cannot be measured says why, and the others
    are still measured."""
    try:
        print(figure(), flush=True)
    except Exception as exc:  # a timeout under load, a page error: report, go on
        print(f"{name:<44} not measured: {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    from playwright.sync_api import sync_playwright

    fake_model.SLOW_DELAY = 0.001  # /slow N: one word a millisecond
    with tempfile.TemporaryDirectory() as root, PageChat() as fake:
        env = {
            "OSTINATO_MODEL": "openai-chat:fake-model",
            "OPENAI_BASE_URL": f"{fake.url}/v1",
            "OPENAI_API_KEY": "k",
        }
        site = Site(Path(root), env)
        long_id = fill(site.db, 2_000, "Long")
        longest_id = fill(site.db, LONGEST, "Longest")
        site.start()
        try:
            empty_id = site.conversation("Empty")
            with sync_playwright() as playwright:
                chromium = playwright.chromium
                browser = chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                empty = f"{site.url}/c/{empty_id}"
                long = f"{site.url}/c/{long_id}"
                print(f"before: {load()}", flush=True)
                measure(
                    "first usable screen, empty",
                    lambda: line("first usable screen, empty", first_screen(browser, empty, None)),
                )
                measure(
                    "first usable screen, 2,000 messages",
                    lambda: line(
                        "first usable screen, 2,000 messages", first_screen(browser, long, LAST)
                    ),
                )
                longest = (
                    f"first usable screen, {LONGEST:,} messages",
                    f"{site.url}/c/{longest_id}",
                    f"message {LONGEST - 1}:",
                )
                measure(
                    longest[0],
                    lambda: line(longest[0], first_screen(browser, longest[1], longest[2])),
                )
                measure("delta arrival to paint", lambda: late(streaming(browser, site)))
                measure("bytes shipped (compressed)", lambda: bytes_line(browser, empty))
                print(f"after: {load()}", flush=True)
                browser.close()
        finally:
            site.stop()


if __name__ == "__main__":
    main()
