"""The tools a model with a small context window is offered by default.

The built-in tools' schemas take about 4,300 tokens, half of an 8,192-token window. A
model whose window (``ostinato.context.catalog``: the catalog, the setting
``models.context_windows``, or what a configured model server reports) is at most
``SMALL_WINDOW`` tokens is offered the built-ins outside ``LEFT_OUT`` (about 1,800
tokens): the clock, the calculator, asking the person, attachments, files, the shell,
fetching, memory (remember, recall, forget) and the sub-agents (``delegate``,
``spawn_agents``). Only an agent that offers every tool (no ``tools`` list) is trimmed:
an agent's own list is offered as written, and tools from the operator's other sources
(OpenAPI documents, MCP servers, forged tools) are offered whatever the window.
"""

from __future__ import annotations

from collections.abc import Iterable

SMALL_WINDOW = 16_384

LEFT_OUT = frozenset(
    {
        "ask_form",
        "choose",
        "suggest_replies",
        "show",
        "relate_memories",
        "memory_graph",
        "memory_conflicts",
        "manage_tools",
        "schedule",
        "manage_messages",
        "create_tool",
        "remove_tool",
        "forged_tools",
    }
)


def allowed_for(window: int, allow: Iterable[str] | None, known: Iterable[str]) -> list[str] | None:
    """The allow-list a turn's catalog is built with: ``allow`` (the agent's own list,
    None for every tool) as it is, except that every tool but ``LEFT_OUT`` is the list
    of an agent offering every tool to a model of at most ``SMALL_WINDOW`` tokens."""
    if allow is not None:
        return list(allow)
    if window > SMALL_WINDOW:
        return None
    return [name for name in known if name not in LEFT_OUT]
