"""manage_tools in real turns: listing runs without asking, switching asks (and applies
from the next turn), the protected tools refuse, another owner is not touched."""

from __future__ import annotations

import json
from typing import Any

from ostinato.approvals import ApprovalPolicy
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store import MemoryStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.manage import PROTECTED, manage_tools_tool
from ostinato.tools.registry import ToolRegistry


def runtime(model: ScriptedModel, policy: ApprovalPolicy | None = None) -> Runtime:
    tools = ToolRegistry([*builtin_tools(), manage_tools_tool()])
    return Runtime(MemoryStore(), model=model, tools=tools, approvals=policy)


async def result_of(rt: Runtime, cid: str) -> Any:
    (call,) = [c for c in await rt.store.list_tool_calls(cid) if c.name == "manage_tools"][-1:]
    return call


async def test_listing_runs_without_asking_and_shows_each_tools_state() -> None:
    model = ScriptedModel()
    rt = runtime(model)  # the default policy asks before write: listing does not ask
    try:
        conversation = await rt.create_conversation(owner="ann")
        model.add(tool_step(("manage_tools", {"action": "list"})), text_step("ok"))
        await rt.run_turn(conversation.id, "which tools do you have?")
        call = await result_of(rt, conversation.id)
        assert call.status == "ok", call.result
        tools = {t["name"]: t for t in json.loads(call.result or "")["tools"]}
        assert tools["clock"] == {"name": "clock", "on": True}
        assert tools["manage_tools"] == {"name": "manage_tools", "on": True, "protected": True}
        assert rt.protected_tools >= PROTECTED
    finally:
        await rt.close()


async def test_switching_asks_and_with_no_one_to_ask_nothing_changes() -> None:
    model = ScriptedModel()
    rt = runtime(model)
    try:
        conversation = await rt.create_conversation(owner="ann")
        model.add(tool_step(("manage_tools", {"action": "off", "name": "clock"})), text_step("."))
        await rt.run_turn(conversation.id, "switch the clock off")
        call = await result_of(rt, conversation.id)
        assert call.status == "refused" and "approval" in (call.result or "")
        assert await rt.switched_off("ann") == frozenset()
    finally:
        await rt.close()


async def test_a_switch_applies_from_the_next_turn_and_protected_tools_refuse() -> None:
    model = ScriptedModel()
    rt = runtime(model, ApprovalPolicy(ask_for=frozenset()))  # nobody needs asking here
    try:
        conversation = await rt.create_conversation(owner="ann")
        model.add(tool_step(("manage_tools", {"action": "off", "name": "clock"})), text_step("."))
        await rt.run_turn(conversation.id, "switch the clock off")
        call = await result_of(rt, conversation.id)
        assert json.loads(call.result or "") == {
            "tool": {"name": "clock", "on": False},
            "note": "from the next turn on",
        }
        model.add(text_step("no clock"))
        await rt.run_turn(conversation.id, "what time is it?")
        assert "clock" not in [t.name for t in model.requests[-1].tools]
        assert await rt.switched_off("bob") == frozenset()

        model.add(
            tool_step(("manage_tools", {"action": "off", "name": "manage_tools"})), text_step(".")
        )
        await rt.run_turn(conversation.id, "switch yourself off")
        call = await result_of(rt, conversation.id)
        assert call.is_error and "protected" in (call.result or "")
        model.add(tool_step(("manage_tools", {"action": "on"})), text_step("."))
        await rt.run_turn(conversation.id, "switch on")
        call = await result_of(rt, conversation.id)
        assert call.is_error and "name the tool" in (call.result or "")
    finally:
        await rt.close()
