"""Output filters: what a surface shows of an assistant's text. Pure: text in, text out.

A filter is fed the text of one assistant reply as it streams, delta by delta, and gives
back what can be shown now; ``flush`` gives the rest at the end of the reply (or of a
step, before its tools run, so nothing waits behind a slow tool). A filter holds back only
the tail that could still turn into something it removes, so its output does not depend on
how the text was cut into deltas: for every way of cutting ``text``,
``"".join(feed(d) for d in deltas) + flush() == apply(text)``. A phrase split over two
deltas is still caught.

The filters, applied in this order (each to what the one before let through):

1. ``strip_tool_syntax``: tool calls a model wrote as text instead of calling the tool
   (``<tool_call>...</tool_call>``, ``<function=...>...</function>``,
   ``<|python_tag|>...``, ``[TOOL_CALLS]...``): removed from where they open to where
   they close (or to the end of the reply).
2. ``strip_json_fences``: a reply that is only JSON in a code fence (```` ```json ````
   or a bare ```` ``` ````, then ``{`` or ``[``) is shown without the fence.
3. ``drop_phrases``: each configured phrase is removed wherever it occurs, ignoring case.
4. ``shorten_urls``: a bare ``http(s)://`` URL becomes its host (``www.`` dropped):
   ``https://docs.python.org/3/library/re.html`` is shown as ``docs.python.org``, which
   a voice can say. A URL right after ``(`` or ``<`` (a Markdown link's target) is kept.

The raw reply stays in the store as the model wrote it: the model's history is never
filtered, only what people are shown (``OutputFilters.chain`` makes one per reply).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import urlsplit


class TextFilter(Protocol):
    def feed(self, text: str) -> str:
        """Take the next delta; the text that can be shown now."""
        ...

    def flush(self) -> str:
        """The reply (or step) ended: everything still held."""
        ...


@dataclass(frozen=True, slots=True)
class OutputFilters:
    """Which filters a surface applies to one agent's replies (all off by default)."""

    strip_tool_syntax: bool = False
    strip_json_fences: bool = False
    drop_phrases: tuple[str, ...] = ()
    shorten_urls: bool = False

    @property
    def active(self) -> bool:
        return bool(
            self.strip_tool_syntax
            or self.strip_json_fences
            or any(p.strip() for p in self.drop_phrases)
            or self.shorten_urls
        )

    def over(self, **changes: object) -> OutputFilters:
        """These filters with the settings in ``changes`` that are not ``None``."""
        given = {k: v for k, v in changes.items() if v is not None}
        if isinstance(given.get("drop_phrases"), list):
            given["drop_phrases"] = tuple(given["drop_phrases"])  # type: ignore[arg-type]
        return replace(self, **given)  # type: ignore[arg-type]

    def chain(self) -> Chain:
        """A fresh filter chain for one reply."""
        stages: list[TextFilter] = []
        if self.strip_tool_syntax:
            stages.append(ToolSyntax())
        if self.strip_json_fences:
            stages.append(JsonFence())
        phrases = [p for p in self.drop_phrases if p.strip()]
        if phrases:
            stages.append(Phrases(phrases))
        if self.shorten_urls:
            stages.append(Urls())
        return Chain(stages)

    def apply(self, text: str) -> str:
        """The whole reply, filtered."""
        if not self.active:
            return text
        chain = self.chain()
        return chain.feed(text) + chain.flush()


NO_FILTERS = OutputFilters()


class Chain:
    """Several filters, each fed what the one before released."""

    def __init__(self, stages: Sequence[TextFilter]) -> None:
        self.stages = list(stages)

    def feed(self, text: str) -> str:
        for stage in self.stages:
            if not text:
                return ""
            text = stage.feed(text)
        return text

    def flush(self) -> str:
        text = ""
        for stage in self.stages:
            text = (stage.feed(text) if text else "") + stage.flush()
        return text


def _held_prefix(
    text: str, words: Iterable[str], *, fold: bool = False, whole: bool = False
) -> int:
    """The length of the longest tail of ``text`` that is a proper start of a word (or
    the whole word too, with ``whole``)."""
    subject = text.lower() if fold else text
    best = 0
    for word in words:
        word = word.lower() if fold else word
        longest = len(word) if whole else len(word) - 1
        for size in range(min(longest, len(subject)), best, -1):
            if subject.endswith(word[:size]):
                best = size
                break
    return best


# --- 1. tool-call syntax -----------------------------------------------------------------

TOOL_SYNTAX: tuple[tuple[str, str | None], ...] = (
    ("<tool_call>", "</tool_call>"),
    ("<function_calls>", "</function_calls>"),
    ("<function=", "</function>"),
    ("<|python_tag|>", "<|eom_id|>"),
    ("<|tool_call|>", None),
    ("[TOOL_CALLS]", None),
)
"""(opening, closing): the ways models leak a tool call into their text (Hermes / Qwen,
Anthropic-style XML, Llama 3.1's python tag, Mistral). ``None``: to the end of the reply."""


class ToolSyntax:
    def __init__(self, pairs: Sequence[tuple[str, str | None]] = TOOL_SYNTAX) -> None:
        self.pairs = list(pairs)
        self.held = ""
        self.closing: str | None = None  # inside a call: what ends it
        self.inside = False

    def feed(self, text: str) -> str:
        self.held += text
        out: list[str] = []
        while self.held:
            if self.inside:
                if self.closing is None:
                    self.held = ""
                    break
                end = self.held.find(self.closing)
                if end < 0:
                    keep = _held_prefix(self.held, [self.closing])
                    self.held = self.held[len(self.held) - keep :] if keep else ""
                    break
                self.held = self.held[end + len(self.closing) :]
                self.inside = False
                continue
            found = [(self.held.find(o), o, c) for o, c in self.pairs if o in self.held]
            if not found:
                keep = _held_prefix(self.held, [o for o, _ in self.pairs])
                out.append(self.held[: len(self.held) - keep])
                self.held = self.held[len(self.held) - keep :]
                break
            start, opening, self.closing = min(found)
            out.append(self.held[:start])
            self.held = self.held[start + len(opening) :]
            self.inside = True
        return "".join(out)

    def flush(self) -> str:
        rest = "" if self.inside else self.held
        self.held, self.inside = "", False
        return rest


# --- 2. a fenced JSON-only reply ---------------------------------------------------------

_OPENING = re.compile(r"\s*```[ \t]*(json)?[ \t]*\n\s*", re.IGNORECASE)
_CLOSING_TAIL = re.compile(r"\s*`{0,3}\s*$")


class JsonFence:
    """Decides at the start of the reply: a fence (no language, or ``json``) whose content
    starts with ``{`` or ``[`` is dropped, with its closing fence when nothing but white
    space follows it; anything else passes unchanged."""

    def __init__(self) -> None:
        self.mode = "start"  # "start" | "pass" | "json"
        self.held = ""

    def feed(self, text: str) -> str:
        self.held += text
        if self.mode == "start":
            self._decide()
        if self.mode == "pass":
            out, self.held = self.held, ""
            return out
        if self.mode == "json":
            tail = _CLOSING_TAIL.search(self.held)
            cut = tail.start() if tail else len(self.held)
            out, self.held = self.held[:cut], self.held[cut:]
            return out
        return ""

    def _decide(self) -> None:
        stripped = self.held.lstrip()
        if not stripped:
            return
        if not "```".startswith(stripped[:3]):
            self.mode = "pass"
            return
        opening = _OPENING.match(self.held)
        if opening is None:
            line = self.held.lstrip()
            if "\n" in line and not re.match(r"```[ \t]*(json)?[ \t]*\n", line, re.IGNORECASE):
                self.mode = "pass"
            return
        rest = self.held[opening.end() :]
        if not rest:
            return
        if rest[0] in "{[":
            self.mode, self.held = "json", rest
        else:
            self.mode = "pass"

    def flush(self) -> str:
        held, self.held = self.held, ""
        if self.mode == "json" and held.strip() in ("```", ""):
            return ""
        return held


# --- 3. phrases ---------------------------------------------------------------------------


class Phrases:
    """Scans left to right, as one pass over the whole reply would: a match is taken only
    once no longer phrase could still match at the same place."""

    def __init__(self, phrases: Sequence[str]) -> None:
        self.phrases = sorted({p for p in phrases if p}, key=len, reverse=True)
        self.folded = [p.lower() for p in self.phrases]
        self.pattern = re.compile("|".join(re.escape(p) for p in self.phrases), re.IGNORECASE)
        self.held = ""

    def feed(self, text: str) -> str:
        return self._scan(self.held + text, final=False)

    def flush(self) -> str:
        return self._scan(self.held, final=True)

    def _scan(self, text: str, *, final: bool) -> str:
        out: list[str] = []
        pos = 0
        while (match := self.pattern.search(text, pos)) is not None:
            if not final and self._may_grow(text[match.start() :]):
                out.append(text[pos : match.start()])
                self.held = text[match.start() :]
                return "".join(out)
            out.append(text[pos : match.start()])
            pos = match.end()
        rest = text[pos:]
        keep = 0 if final else _held_prefix(rest, self.phrases, fold=True)
        out.append(rest[: len(rest) - keep])
        self.held = rest[len(rest) - keep :]
        return "".join(out)

    def _may_grow(self, tail: str) -> bool:
        """A longer phrase could still match where ``tail`` starts."""
        folded = tail.lower()
        return any(len(p) > len(folded) and p.startswith(folded) for p in self.folded)


# --- 4. URLs --------------------------------------------------------------------------------

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""
_SCHEMES = ("http://", "https://")


def short_url(url: str) -> str:
    """``https://www.example.com/a/b?c`` -> ``example.com`` (the URL when it has no host)."""
    host = urlsplit(url).hostname or ""
    host = host.removeprefix("www.")
    return host or url


class Urls:
    def __init__(self) -> None:
        self.held = ""
        self.before = ""  # the last character released (a link's "(" may be in it)

    def feed(self, text: str) -> str:
        self.held += text
        cut = self._safe_end()
        out, self.held = self.held[:cut], self.held[cut:]
        return self._shorten(out)

    def _safe_end(self) -> int:
        """Where the text can be released: before a URL that may still grow, or before a
        tail that may yet start one."""
        last = None
        for match in _URL.finditer(self.held):
            last = match
        if last is not None and last.end() == len(self.held):
            return last.start()
        keep = _held_prefix(self.held, _SCHEMES, fold=True, whole=True)
        return len(self.held) - keep

    def _shorten(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            url = match.group(0)
            before = text[match.start() - 1] if match.start() else self.before
            if before and before in "(<":
                return url
            trimmed = url.rstrip(_TRAILING)
            return short_url(trimmed) + url[len(trimmed) :]

        if text:
            shortened = _URL.sub(one, text)
            self.before = text[-1]
            return shortened
        return text

    def flush(self) -> str:
        held, self.held = self.held, ""
        return self._shorten(held)
