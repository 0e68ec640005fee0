"""``ostinato replay``: stored turns re-run with the recorded model outputs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ostinato.agents import AgentConfig
from ostinato.cli.main import main
from ostinato.cli.replay import format_report, replay_conversation, step_for
from ostinato.errors import ModelError, NotFound
from ostinato.messages import Message, TextBlock, ThinkingBlock, ToolUseBlock
from ostinato.models.scripted import ScriptedModel, Step, error_step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store.base import AppendMessage, StartTurn, Store, Turn, utcnow
from ostinato.store.memory import MemoryStore
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry


async def _record(store: Store, steps: list[Step], texts: list[str], tools: ToolRegistry) -> str:
    model = ScriptedModel(steps)
    runtime = Runtime(store, model=model, tools=tools)
    cid = (await runtime.create_conversation()).id
    for text in texts:
        await runtime.run_turn(cid, text)
    model.assert_consumed()
    return cid


def _counting_tools(start: int = 1) -> ToolRegistry:
    """The built-ins plus ``ticket``, which gives a new number on every call."""
    tools = ToolRegistry(builtin_tools())
    numbers = itertools.count(start)

    @tools.tool
    def ticket() -> int:
        """Take the next ticket number."""
        return next(numbers)

    return tools


async def test_identical_turns_replay_ok() -> None:
    store = MemoryStore()
    steps = [
        tool_step(("calculator", {"expression": "2*(3+4)"}), ("clock", {}), text="Checking."),
        text_step("14, at noon."),
        text_step("Bye."),
    ]
    cid = await _record(store, steps, ["sum and time?", "thanks"], ToolRegistry(builtin_tools()))
    report = await replay_conversation(store, cid)
    assert [t.outcome for t in report.turns] == ["ok", "ok"]
    assert [t.rows for t in report.turns] == [3, 1]
    assert report.identical
    text = format_report(report, {"clock"})
    assert "turn 1" in text and ": OK" in text and text.endswith("identical")


async def test_the_current_branch_is_replayed_a_regenerate_as_its_question() -> None:
    store = MemoryStore()
    steps = [text_step("a1"), text_step("a2"), text_step("a2, edited"), text_step("again")]
    model = ScriptedModel(steps)
    runtime = Runtime(store, model=model, tools=ToolRegistry(builtin_tools()))
    cid = (await runtime.create_conversation()).id
    await runtime.run_turn(cid, "q1")
    await runtime.run_turn(cid, "q2")
    await (await (await runtime.edit(cid, 3, "q2, edited")).handle()).result()
    await (await (await runtime.regenerate(cid, 6)).handle()).result()
    report = await replay_conversation(store, cid)
    # q1's turn; the edit's, whose answer the regenerate gave again (q2's turn is on
    # another branch); the regenerate's, replayed as the edited question's turn
    assert [(t.outcome, t.rows) for t in report.turns] == [("ok", 1), ("skipped", 0), ("ok", 1)]
    assert report.identical


async def test_a_tool_whose_output_changed_diverges_unless_played_back() -> None:
    store = MemoryStore()
    steps = [tool_step(("ticket", {})), text_step("You have a ticket.")]
    cid = await _record(store, steps, ["a ticket please"], _counting_tools())
    live = await replay_conversation(store, cid, tools=_counting_tools(), recorded=())
    # a fresh counter starts at 1 again, as the recording did: identical
    assert live.identical
    tools = _counting_tools(start=2)  # the tool now answers differently
    drifted = await replay_conversation(store, cid, tools=tools, recorded=())
    assert [t.outcome for t in drifted.turns] == ["diverged"]
    detail = drifted.turns[0].detail or ""
    assert "row seq 3" in detail and '"content": "1"' in detail and '"content": "2"' in detail
    assert "DIVERGED" in format_report(drifted, ())
    played = await replay_conversation(store, cid, tools=tools, recorded={"ticket"})
    assert played.identical


async def test_a_loop_that_decides_differently_diverges() -> None:
    """The recorded turn called a tool then answered; a loop whose budget is one model
    call must wrap up instead, so the replay ends differently."""
    store = MemoryStore()
    steps = [tool_step(("calculator", {"expression": "1+1"})), text_step("2")]
    cid = await _record(store, steps, ["1+1?"], ToolRegistry(builtin_tools()))
    report = await replay_conversation(store, cid, agent=AgentConfig(max_model_calls=1))
    assert [t.outcome for t in report.turns] == ["diverged"]
    assert report.turns[0].detail is not None
    assert not report.identical


async def test_failed_turns_replay_and_interrupted_ones_are_skipped() -> None:
    store = MemoryStore()
    tools = ToolRegistry(builtin_tools())
    steps = [error_step(ModelError("down")), text_step("fine now")]
    cid = await _record(store, steps, ["one", "two"], tools)
    runtime = Runtime(store, model=ScriptedModel())
    await store.write(
        StartTurn(Turn("crashed", cid, "r", "running", utcnow())),
        AppendMessage(cid, Message("user", (TextBlock("three"),)), "crashed"),
    )
    await runtime.recover()  # the turn a crash left running ends "interrupted"
    report = await replay_conversation(store, cid)
    assert [t.outcome for t in report.turns] == ["ok", "ok", "skipped"]
    assert report.turns[2].detail == "the turn ended interrupted"
    assert report.identical
    assert "SKIPPED" in format_report(report, ())


async def test_unknown_conversation() -> None:
    with pytest.raises(NotFound):
        await replay_conversation(MemoryStore(), "nope")


def test_step_for_keeps_blocks_and_tool_ids() -> None:
    message = Message(
        "assistant",
        (
            ThinkingBlock("hmm", signature="sig"),
            TextBlock("Let me see."),
            ToolUseBlock("toolu_9", "calculator", {"expression": "1"}),
        ),
    )
    step = step_for(message)
    names = [type(e).__name__ for e in step.events]
    assert names == [
        "ThinkingDelta",
        "TextDelta",
        "ToolCallStart",
        "ToolCallEnd",
        "Usage",
        "Stop",
    ]
    assert step.events[2].id == "toolu_9"  # type: ignore[union-attr]


async def _record_deployed(url: str, steps: list[Step], texts: list[str], data: Path) -> str:
    """A conversation as ``serve`` makes it with the default configuration (memory tools,
    so a hidden recall seed step before each turn's first model call)."""
    from ostinato.config import Config
    from ostinato.deployment import build_runtime
    from ostinato.store import open_store

    store = await open_store(url)
    model = ScriptedModel(steps)
    deployment = await build_runtime(
        Config(), store, default_model=model, default_id=model.name, data_dir=data
    )
    deployment.runtime.after_turn = None  # no fact extraction: the script is the turns'
    try:
        cid = (await deployment.runtime.create_conversation()).id
        for text in texts:
            await deployment.runtime.run_turn(cid, text)
    finally:
        await deployment.runtime.close()
        await deployment.aclose()
    model.assert_consumed()
    return cid


def test_replay_command_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    monkeypatch.chdir(tmp_path)  # no ./ostinato.toml: the default configuration
    monkeypatch.delenv("OSTINATO_CONFIG", raising=False)
    url = f"sqlite:///{tmp_path / 'replay.db'}"
    steps = [
        tool_step(("calculator", {"expression": "6*7"})),
        text_step("42"),
        tool_step(("clock", {})),
        text_step("It is late."),
    ]
    cid = asyncio.run(_record_deployed(url, steps, ["6*7?", "time?"], tmp_path / "data"))
    assert main(["replay", cid, "--database-url", url]) == 0
    out = capsys.readouterr().out
    assert f"replay of conversation {cid}" in out and out.count(": OK") == 2
    assert out.rstrip().endswith("identical")
    assert main(["replay", "nope", "--database-url", url]) == 2
    assert "no conversation" in capsys.readouterr().err


def test_replay_takes_the_configuration_its_conversation_was_made_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool switched off by the configuration is off on replay too: without the file
    the replay would run it and diverge."""
    import asyncio

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OSTINATO_CONFIG", raising=False)
    url = f"sqlite:///{tmp_path / 'configured.db'}"
    steps = [tool_step(("calculator", {"expression": "1+1"})), text_step("I cannot compute.")]
    config_file = tmp_path / "elsewhere.toml"
    config_file.write_text('[tools]\ndisabled = ["calculator"]\n')

    async def record() -> str:
        from ostinato.config import load_config
        from ostinato.deployment import build_runtime
        from ostinato.store import open_store

        store = await open_store(url)
        model = ScriptedModel(steps)
        config = load_config(config_file)[0]
        deployment = await build_runtime(
            config, store, default_model=model, default_id=model.name, data_dir=tmp_path
        )
        deployment.runtime.after_turn = None
        try:
            cid = (await deployment.runtime.create_conversation()).id
            await deployment.runtime.run_turn(cid, "1+1?")
        finally:
            await deployment.runtime.close()
        return cid

    cid = asyncio.run(record())
    assert main(["replay", cid, "--database-url", url, "--config", str(config_file)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("identical")
    assert main(["replay", cid, "--database-url", url]) == 1  # without it: calculator runs
    assert "DIVERGED" in capsys.readouterr().out


def test_replay_prints_each_turns_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from ostinato.store import open_store

    url = f"sqlite:///{tmp_path / 'timeline.db'}"

    async def record() -> str:
        store = await open_store(url)
        steps = [tool_step(("calculator", {"expression": "6*7"})), text_step("42")]
        cid = await _record(store, steps, ["6*7?"], ToolRegistry(builtin_tools()))
        await store.close()
        return cid

    cid = asyncio.run(record())
    assert main(["replay", cid, "--timeline", "--database-url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"timeline of conversation {cid}"
    assert lines[1].startswith("turn 1 (") and "end_turn in" in lines[1]
    assert "2 model calls" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ["step", "model", "tool", "step", "model"]
    assert "calculator" in lines[4] and " ok " in lines[4]
    assert main(["replay", "nope", "--timeline", "--database-url", url]) == 2
    assert "no conversation" in capsys.readouterr().err
