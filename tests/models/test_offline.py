"""The offline model's introduction: what it is, how to configure a real model, and the
tools it can call as a short list grouped by what they are for (issue 26)."""

from __future__ import annotations

from ostinato.messages import Message, TextBlock
from ostinato.models.base import ModelRequest, TextDelta, ToolDefinition
from ostinato.models.offline import OfflineModel

# what `ostinato serve` offers by default (its banner: builtins (27))
SERVED = [
    "clock", "calculator", "ask_user", "read_attachment", "ask_form", "choose",
    "suggest_replies", "show", "read_file", "list_files", "write_file", "shell", "http_fetch",
    "remember", "recall", "forget", "relate_memories", "memory_graph", "memory_conflicts",
    "delegate", "spawn_agents", "manage_tools", "schedule", "manage_messages", "create_tool",
    "remove_tool", "forged_tools",
]  # fmt: skip


async def test_the_introduction_lists_the_tools_grouped_one_line_each() -> None:
    tools = tuple(ToolDefinition(name, "", {"type": "object"}) for name in SERVED)
    request = ModelRequest(
        system="", messages=(Message("user", (TextBlock("hello"),)),), tools=tools
    )
    text = "".join(
        [e.text async for e in OfflineModel().stream(request) if isinstance(e, TextDelta)]
    )
    intro, listed = text.split("\n\n")
    assert "offline model" in intro and "OSTINATO_BASE_URL" in intro
    title, *lines = listed.splitlines()
    assert title == "Tools available here:"
    assert lines[0] == "- Basics: clock, calculator"
    assert 5 <= len(lines) <= 9 and all(line.startswith("- ") for line in lines)
    named = [n for line in lines for n in line.split(": ", 1)[1].split(", ")]
    assert sorted(named) == sorted(t.name for t in tools)  # each once
    assert not any(line.startswith("- Others") for line in lines)  # every built-in grouped
