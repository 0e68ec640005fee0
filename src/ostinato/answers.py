"""What a typed message means while something waits for a person. Pure.

Surfaces that carry only text (the OpenAI-compatible endpoint, a voice client, the AI
SDK's plain messages) cannot press an approval's buttons or a card's options: the person
answers by typing. ``interpret`` reads the next message against what waits, in this order:

1. An approval waits: ``yes`` (``y``, ``ok``, ``approve``, ``allow``, ``go ahead`` ...)
   approves the call once; ``always`` approves it and remembers the grant (for the call's
   family when it has one, else for the exact call); ``no`` (``n``, ``decline``,
   ``deny``, ``stop`` ...) declines it.
2. A question card waits:
   - ``ask_user`` with options: an option's text (ignoring case) or its number picks it;
     with ``multiple``, several separated by commas (or ``and``) pick each;
   - ``ask_user`` without options: the whole message is the answer;
   - ``choose``: an option's label, its id or its number picks it (``{"id": ...}`` goes
     back, or ``{"ids": [...]}`` with ``multiple``, as the chat page sends).
3. Anything else is a new message: the runtime then dismisses what waited (the person
   moved on), exactly as a typed message does on every other surface.

``describe`` says in words what waits and how to answer it, for a surface that ends its
reply there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ostinato.messages import JSON

YES = frozenset(
    {"y", "yes", "yeah", "yep", "ok", "okay", "sure", "approve", "approved", "allow",
     "go ahead", "do it", "yes please", "please do"}
)  # fmt: skip
ALWAYS = frozenset({"always", "a", "yes always", "always allow", "allow always"})
NO = frozenset(
    {"n", "no", "nope", "decline", "declined", "deny", "don't", "do not", "stop",
     "no thanks", "refuse"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class WaitingApproval:
    approval_id: str
    tool_use_id: str
    tool: str
    input: JSON
    risk: str
    family: str | None = None


@dataclass(frozen=True, slots=True)
class WaitingCard:
    tool_use_id: str
    name: str
    input: JSON = field(default_factory=dict)


Waiting: TypeAlias = WaitingApproval | WaitingCard


@dataclass(frozen=True, slots=True)
class Decide:
    """Approve or decline the approval that waits."""

    approval_id: str
    approve: bool
    remember: Literal["none", "exact", "family"] = "none"


@dataclass(frozen=True, slots=True)
class AnswerCard:
    tool_use_id: str
    result: JSON | str | list[str]  # what the card's tool call returns


@dataclass(frozen=True, slots=True)
class Typed:
    """A new message (what waited, if anything, is dismissed by it)."""


Reading: TypeAlias = Decide | AnswerCard | Typed


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[\s.!?,;:'\"]+$", "", text.strip().lower()).split())


def interpret(text: str, waiting: Waiting | None) -> Reading:
    """What ``text`` does to ``waiting`` (see the module's rules)."""
    if isinstance(waiting, WaitingApproval):
        word = _plain(text)
        if word in ALWAYS:
            remember: Literal["exact", "family"] = "family" if waiting.family else "exact"
            return Decide(waiting.approval_id, True, remember)
        if word in YES:
            return Decide(waiting.approval_id, True)
        if word in NO:
            return Decide(waiting.approval_id, False)
        return Typed()
    if isinstance(waiting, WaitingCard):
        return _card(text, waiting)
    return Typed()


def options_of(card: WaitingCard) -> list[tuple[str, str]]:
    """(label, value) of each option: the value is what goes back when it is picked."""
    raw = card.input.get("options")
    if not isinstance(raw, list):
        return []
    found = []
    for i, option in enumerate(raw):
        if isinstance(option, dict):
            value = str(option.get("id", i))
            found.append((str(option.get("label", value)), value))
        else:
            found.append((str(option), str(option)))
    return found


def _card(text: str, card: WaitingCard) -> Reading:
    if card.name not in ("ask_user", "choose"):
        return Typed()
    options = options_of(card)
    if not options:
        return AnswerCard(card.tool_use_id, text.strip()) if card.name == "ask_user" else Typed()
    multiple = bool(card.input.get("multiple"))
    by_id = card.name == "choose"
    parts = re.split(r"\s*(?:,|\band\b)\s*", text.strip()) if multiple else [text]
    picked = [_pick(part, options, by_id=by_id) for part in parts if part]
    if not picked or any(p is None for p in picked):
        return Typed()
    values = [p for p in picked if p is not None]
    if by_id:  # as the chat page answers a choose card
        return AnswerCard(card.tool_use_id, {"ids": values} if multiple else {"id": values[0]})
    return AnswerCard(card.tool_use_id, values if multiple else values[0])


def _pick(text: str, options: list[tuple[str, str]], *, by_id: bool) -> str | None:
    word = _plain(text)
    if word.isdigit() and 1 <= int(word) <= len(options):
        label, value = options[int(word) - 1]
        return value if by_id else label
    for label, value in options:
        if word == _plain(label) or (by_id and word == _plain(value)):
            return value if by_id else label
    return None


def describe(waiting: Waiting) -> str:
    """What waits, and how to answer it by typing."""
    if isinstance(waiting, WaitingApproval):
        call = json.dumps(waiting.input, ensure_ascii=False)
        if len(call) > 300:
            call = call[:299] + "…"
        remember = " (for every call like it)" if waiting.family else " (for this exact call)"
        return (
            f"Waiting for your approval: {waiting.tool} {call} (risk: {waiting.risk}). "
            f"Answer yes to allow it, always to allow it from now on{remember}, or no to "
            "refuse it."
        )
    question = str(waiting.input.get("question") or waiting.input.get("title") or "")
    options = options_of(waiting)
    if waiting.name in ("ask_user", "choose") and options:
        listed = "; ".join(f"{i}. {label}" for i, (label, _) in enumerate(options, 1))
        several = " (several: separate them with commas)" if waiting.input.get("multiple") else ""
        return f"{question}\nReply with one of: {listed}{several}."
    if waiting.name == "ask_user":
        return f"{question}\nReply with your answer."
    return f"{question}\nThis question waits for an answer in the chat page ({waiting.name})."
