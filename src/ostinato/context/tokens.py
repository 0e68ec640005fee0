"""Token accounting: a fast estimate per message, calibrated by what providers report.

The estimate is about four characters a token, plus a few tokens of framing per message
and block; images count a flat amount. After each model call the loop tells the
estimator how many input tokens the provider actually counted, and the estimator keeps a
per-model correction factor (an exponential moving average of actual / estimated), so
its numbers drift toward the provider's tokenizer without ever running it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ostinato.messages import (
    JSON,
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from ostinato.models.base import ModelRequest, ToolDefinition, Usage

CHARS_PER_TOKEN = 4.0
_ENCODER = json.JSONEncoder(ensure_ascii=False)
PER_MESSAGE = 4
PER_BLOCK = 3
IMAGE_TOKENS = 1_200
FILE_TOKENS = 2_000
SMOOTHING = 0.3  # weight of the newest observation in the moving average
LIMITS = (0.5, 3.0)  # the correction factor stays in this range


def _chars(message: Message) -> tuple[int, int]:
    """Characters of text, and a flat token count for media."""
    chars = 0
    flat = 0
    for block in message.blocks:
        match block:
            case TextBlock(text=text) | ThinkingBlock(text=text):
                chars += len(text)
            case ToolUseBlock(name=name, input=tool_input):
                chars += len(name) + len(_ENCODER.encode(tool_input))
            case ToolResultBlock(content=content):
                if isinstance(content, str):
                    chars += len(content)
                else:
                    for part in content:
                        if isinstance(part, TextBlock):
                            chars += len(part.text)
                        else:
                            flat += IMAGE_TOKENS
            case ImageBlock():
                flat += IMAGE_TOKENS
            case FileBlock():
                flat += FILE_TOKENS
    return chars, flat + PER_MESSAGE + PER_BLOCK * len(message.blocks)


# Stored rows never change, so their estimate is kept by row id (and block count: a
# window merges neighbours into one message under the first one's id).
_KNOWN: dict[tuple[str, int], int] = {}
_KNOWN_MAX = 200_000


def estimate_message(message: Message) -> int:
    key = (message.id, len(message.blocks)) if message.id is not None else None
    if key is not None:
        known = _KNOWN.get(key)
        if known is not None:
            return known
    chars, flat = _chars(message)
    size = int(chars / CHARS_PER_TOKEN) + flat
    if key is not None:
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()  # a crude bound: estimates are cheap to make again
        _KNOWN[key] = size
    return size


def estimate_each(messages: Iterable[Message]) -> list[int]:
    """``estimate_message`` of each message, a stored row's kept estimate read here
    without the call (a turn's window asks it of every row as the turn begins)."""
    sizes: list[int] = []
    for message in messages:
        known = _KNOWN.get((message.id, len(message.blocks))) if message.id is not None else None
        sizes.append(known if known is not None else estimate_message(message))
    return sizes


def estimate_messages(messages: Iterable[Message]) -> int:
    return sum(estimate_message(m) for m in messages)


def estimate_input(request: ModelRequest) -> int:
    """A request's input tokens by estimate (uncalibrated): its system prompt, its tool
    definitions and its messages."""
    return (
        int(len(request.system) / CHARS_PER_TOKEN)
        + estimate_tools(request.tools)
        + estimate_messages(request.messages)
    )


def estimate_usage(request: ModelRequest, reply: Message) -> Usage:
    """A call's token counts by estimate, for a provider that sent none: the request's
    (uncalibrated) estimate in, the reply's out."""
    chars, flat = _chars(reply)
    return Usage(estimate_input(request), int(chars / CHARS_PER_TOKEN) + flat, source="estimate")


# A tool's schema is the same object from turn to turn (the tool holds it, and each
# turn's catalog hands it out): its size is kept by the object's id, with the object (so
# the id is not reused while kept), and a tool made again with a new schema is measured
# anew. Serialising every schema on every turn was a few per cent of a turn start.
_TOOL_CHARS: dict[int, tuple[JSON, int]] = {}
_TOOL_CHARS_MAX = 10_000


def _schema_chars(parameters: JSON) -> int:
    known = _TOOL_CHARS.get(id(parameters))
    if known is not None and known[0] is parameters:
        return known[1]
    chars = len(json.dumps(parameters))
    if len(_TOOL_CHARS) >= _TOOL_CHARS_MAX:
        _TOOL_CHARS.clear()
    _TOOL_CHARS[id(parameters)] = (parameters, chars)
    return chars


def estimate_tools(tools: Iterable[ToolDefinition]) -> int:
    chars = sum(len(t.name) + len(t.description) + _schema_chars(t.parameters) for t in tools)
    return int(chars / CHARS_PER_TOKEN)


class TokenEstimator:
    """Estimates request sizes; calibrated per model by the usage providers return."""

    def __init__(self) -> None:
        self._factor: dict[str, float] = {}

    def factor(self, model: str) -> float:
        return self._factor.get(model, 1.0)

    def raw(self, request: ModelRequest) -> int:
        """The uncalibrated estimate of a request's input tokens."""
        return (
            int(len(request.system) / CHARS_PER_TOKEN)
            + estimate_tools(request.tools)
            + estimate_messages(request.messages)
        )

    def request(self, request: ModelRequest, model: str) -> int:
        return int(self.raw(request) * self.factor(model))

    def calibrate(self, model: str, estimated_raw: int, actual: int) -> None:
        """Fold in one observation: the provider counted ``actual`` input tokens for a
        request whose raw estimate was ``estimated_raw``."""
        if estimated_raw <= 0 or actual <= 0:
            return
        observed = min(max(actual / estimated_raw, LIMITS[0]), LIMITS[1])
        old = self._factor.get(model)
        self._factor[model] = observed if old is None else old + SMOOTHING * (observed - old)
