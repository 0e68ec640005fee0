"""The approval policy's rules, in order, and the consent a turn (or a sub-agent) sees."""

from __future__ import annotations

import pytest

from ostinato.approvals import ApprovalPolicy, Ending, brings_outside_content, outside_content
from ostinato.consent import TurnConsent
from ostinato.memory import memory_tools
from ostinato.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.store.base import Turn, utcnow
from ostinato.store.memory import MemoryStore
from ostinato.tools.base import Risk, Tool
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.fetch import http_fetch_tool
from ostinato.tools.system import workdir_tools


def tool(risk: Risk = "safe", **flags: bool) -> Tool:
    async def run(arguments: object, context: object) -> str:
        return "ok"

    return Tool("t", "d", {"type": "object"}, run, risk=risk, **flags)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("risk", "writes_memory", "outside", "asks"),
    [
        ("safe", False, False, False),
        ("safe", False, True, False),
        ("write", False, False, True),
        ("exec", False, False, True),
        ("network", False, False, True),
        ("safe", True, False, False),  # a memory write in a turn with no outside content
        ("safe", True, True, True),  # ... and after outside content
    ],
)
def test_the_default_policy(risk: Risk, writes_memory: bool, outside: bool, asks: bool) -> None:
    subject = tool(risk, writes_memory=writes_memory)
    assert ApprovalPolicy().needs_consent(subject, outside=outside) is asks


def test_the_memory_rule_can_be_switched_off() -> None:
    policy = ApprovalPolicy(memory_after_outside=False)
    assert not policy.needs_consent(tool(writes_memory=True), outside=True)
    assert not ApprovalPolicy(ask_for=frozenset({"write"})).needs_consent(tool("network"))


def test_which_tools_bring_outside_content() -> None:
    store = MemoryStore()
    named = {t.name: t for t in [*builtin_tools(), *workdir_tools(), *memory_tools(store)]}
    named["http_fetch"] = http_fetch_tool()
    outside = {name for name, t in named.items() if brings_outside_content(t)}
    assert outside == {"http_fetch", "shell", "read_file", "read_attachment"}
    writers = {name for name, t in named.items() if t.writes_memory}
    assert writers == {"remember", "forget", "relate_memories", "memory_conflicts"}
    assert brings_outside_content(None)  # a tool no longer mounted: assume it did


def test_outside_content_in_a_history() -> None:
    named = {"http_fetch": http_fetch_tool(), "recall": tool()}

    def rows(name: str) -> list[Message]:
        use = ToolUseBlock("c1", name, {})
        return [
            Message("user", (TextBlock("hi"),)),
            Message("assistant", (use,)),
            Message("tool", (ToolResultBlock("c1", "x"),)),
        ]

    assert outside_content(rows("http_fetch"), named.get)
    assert not outside_content(rows("recall"), named.get)
    assert outside_content(rows("gone_mcp_tool"), named.get)
    assert not outside_content([Message("user", (TextBlock("hi"),))], named.get)


async def test_a_turn_s_consent_takes_in_outside_content_as_tools_run() -> None:
    consent = TurnConsent(None, None)
    remember = tool(writes_memory=True)
    assert not consent.required(remember)
    consent.took_in(tool())
    assert not consent.required(remember)
    consent.took_in(http_fetch_tool())
    assert consent.required(remember)


async def test_a_sub_agent_can_ask_nobody() -> None:
    consent = TurnConsent(None, None, outside=True)  # as subagents.py builds it
    turn = Turn("t", "c", "r", "running", utcnow())
    call = ToolUseBlock("u", "remember", {"fact": "x"})
    assert consent.required(tool(writes_memory=True)) and consent.required(tool("network"))
    assert await consent.ask(turn, call, tool(), owner=None, seq=0) is Ending.UNREACHABLE
