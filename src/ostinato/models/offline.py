"""The offline model: what answers when no model provider is configured.

It is honest about what it is. It also lets every part of ostinato be tried without a
key: a user message ``/tool NAME {json arguments}`` makes it call tool NAME with those
arguments, and the next call summarises the result.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence

from ostinato.messages import Message, TextBlock, ToolResultBlock
from ostinato.models.base import (
    ModelEvent,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

_TOOL_COMMAND = re.compile(r"^\s*/tool\s+([A-Za-z0-9_.\-]+)\s*(.*)$", re.DOTALL)

HOW_TO_CONFIGURE = (
    "To use a real model, set ANTHROPIC_API_KEY or OPENAI_API_KEY, or point "
    "OSTINATO_BASE_URL at an OpenAI-compatible server (Ollama, vLLM, llama.cpp), "
    "then restart `ostinato serve`."
)


class OfflineModel:
    name = "offline:ostinato"

    def __init__(self) -> None:
        self._calls = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        # The turn-zero seed step (a recall, attachment reads) is the loop's, not the
        # model's: after it the turn is still answering the user's message.
        shown = [m for m in request.messages if not _seed_step(m)]
        last = shown[-1] if shown else None
        if last is not None and last.role == "tool":
            text = self._summarise(last)
        else:
            command = _TOOL_COMMAND.match(_last_user_text(request.messages))
            if command and request.tool_choice != "none":
                async for event in self._call_tool(command.group(1), command.group(2)):
                    yield event
                return
            text = self._introduce(request)
        for word in re.findall(r"\S+\s*", text):
            yield TextDelta(word)
        yield Usage(_estimate(request), max(1, len(text) // 4))
        yield Stop("end_turn")

    async def _call_tool(self, name: str, raw: str) -> AsyncGenerator[ModelEvent, None]:
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            text = (
                f"I could not read the arguments of /tool {name}: {exc}. "
                'Write them as a JSON object, e.g. /tool calculator {"expression": "2*(3+4)"}'
            )
            yield TextDelta(text)
            yield Usage(len(raw) // 4 + 1, len(text) // 4)
            yield Stop("end_turn")
            return
        if not isinstance(arguments, dict):
            arguments = {"value": arguments}
        self._calls += 1
        yield TextDelta(f"Calling {name}.")
        yield ToolCallStart(0, f"offline_{self._calls}", name)
        yield ToolCallEnd(0, input=arguments)
        yield Usage(len(raw) // 4 + 1, 8)
        yield Stop("tool_use")

    def _summarise(self, results: Message) -> str:
        lines = []
        for block in results.blocks:
            if isinstance(block, ToolResultBlock):
                verdict = "failed" if block.is_error else "returned"
                lines.append(f"The tool {verdict}: {_shorten(block.text)}")
        return " ".join(lines) or "The tool finished."

    def _introduce(self, request: ModelRequest) -> str:
        return (
            "No model provider is configured, so this is ostinato's offline model: it "
            f"cannot hold a conversation. {HOW_TO_CONFIGURE} Meanwhile you can try tools: "
            'send /tool NAME {"json": "arguments"}, for example '
            '/tool calculator {"expression": "2*(3+4)"}.\n\n'
            f"{tool_list([t.name for t in request.tools])}"
        )


# The built-in tools by what they are for, in the order the offline model lists them.
TOOL_GROUPS: tuple[tuple[str, frozenset[str]], ...] = (
    ("Basics", frozenset({"clock", "calculator"})),
    ("Ask the person", frozenset({"ask_user", "ask_form", "choose", "suggest_replies", "show"})),
    (
        "Files and commands",
        frozenset({"read_file", "list_files", "write_file", "shell", "read_attachment"}),
    ),
    ("The web", frozenset({"http_fetch"})),
    (
        "Memory",
        frozenset(
            {"remember", "recall", "forget", "relate_memories", "memory_graph", "memory_conflicts"}
        ),
    ),
    ("Other agents", frozenset({"delegate", "spawn_agents"})),
    (
        "Tools, schedules, messages",
        frozenset(
            {
                "manage_tools",
                "create_tool",
                "remove_tool",
                "forged_tools",
                "schedule",
                "manage_messages",
            }
        ),
    ),
)


def tool_list(names: Sequence[str]) -> str:
    """The tools as a short Markdown list, one line per group (others last)."""
    if not names:
        return "No tools are available here."
    lines, left = ["Tools available here:"], list(names)
    for group, members in TOOL_GROUPS:
        found = [n for n in left if n in members]
        if found:
            lines.append(f"- {group}: {', '.join(found)}")
            left = [n for n in left if n not in members]
    if left:
        lines.append(f"- Others: {', '.join(left)}")
    return "\n".join(lines)


def _seed_step(message: Message) -> bool:
    """A row of the turn-zero seed step: its calls, or their results."""
    if message.role == "assistant":
        return bool(message.metadata.get("seed"))
    results = message.tool_results
    return bool(results) and all(r.tool_use_id.startswith("seed_") for r in results)


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    return ""


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _estimate(request: ModelRequest) -> int:
    return sum(len(m.text) for m in request.messages) // 4 + 1
