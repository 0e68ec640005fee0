"""Edits, regenerations and switches through the runtime, on every store engine: the
model sees the current branch only, nothing is deleted, every branch keeps every call
answered, and bad requests are refused before anything is written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ostinato.bus import LocalBus
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import Frame
from ostinato.messages import Message
from ostinato.models.base import Stop, TextDelta
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.store import MemoryStore, SQLiteStore, Store
from ostinato.store.branches import NotALeaf
from ostinato.store.tree import WHOLE
from ostinato.tools.builtins import builtin_tools
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import assert_history_valid
from tests.store.conftest import open_postgres, postgres_url

__all__ = ["postgres_url"]


class RecordingBus(LocalBus):
    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []

    def publish(self, conversation_id: str, frame: Frame) -> None:
        if self.frames:
            assert frame.seq >= self.frames[-1].seq, "frame seq went backwards"
        self.frames.append(frame)
        super().publish(conversation_id, frame)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        opened: Store = MemoryStore()
    elif request.param == "sqlite":
        opened = await SQLiteStore.open(tmp_path / "tree.db")
    else:
        opened = await open_postgres(request.getfixturevalue("postgres_url"))
    yield opened


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
async def runtime(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    runtime = Runtime(
        store,
        model=model,
        tools=ToolRegistry(builtin_tools()),
        bus=RecordingBus(),
        seed_recall=False,
    )
    yield runtime
    await runtime.close()


def seen(request_messages: tuple[Message, ...]) -> list[str]:
    return [m.text for m in request_messages if m.text]


async def two_exchanges(runtime: Runtime, model: ScriptedModel) -> str:
    model.add(text_step("a1"), text_step("a2"))
    cid = (await runtime.create_conversation()).id
    await runtime.run_turn(cid, "q1")
    await runtime.run_turn(cid, "q2")
    return cid


async def texts(runtime: Runtime, cid: str) -> list[str]:
    return [m.text for m in await runtime.store.list_messages(cid)]


async def every_branch_valid(store: Store, cid: str) -> list[list[str]]:
    """Each leaf's branch, checked: every tool_use answered exactly once in it."""
    tree = await store.tree(cid)
    assert tree is not None
    out = []
    for leaf in tree.leaves():
        rows = await store.list_messages(cid, branch=tree.branch_to(leaf))
        assert_history_valid(rows)
        out.append([m.text for m in rows])
    return out


async def test_an_edit_forks_at_the_edited_row_and_the_model_sees_the_new_branch(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    model.add(text_step("a2 for the edit"))
    submission = await runtime.edit(cid, 3, "q2, edited")
    result = await (await submission.handle()).result()
    assert result.stop_reason == "end_turn"
    assert seen(model.requests[-1].messages) == ["q1", "a1", "q2, edited"]
    assert await texts(runtime, cid) == ["q1", "a1", "q2, edited", "a2 for the edit"]
    edited = (await runtime.store.list_messages(cid))[2]
    assert (edited.seq, edited.parent_seq, edited.metadata["edit_of"]) == (5, 2, 3)
    assert "fork_at" not in edited.metadata
    tree = await runtime.store.tree(cid)
    assert tree is not None and tree.siblings(5) == [3, 5]
    assert len(await runtime.store.list_messages(cid, branch=WHOLE)) == 6  # nothing deleted
    types = [f.type for f in runtime.bus.frames]  # type: ignore[attr-defined]
    moved = types.index("branch.changed")
    assert types[moved - 1] == "turn.started" and types[moved + 1] == "message"


async def test_a_regenerate_forks_at_the_question_with_another_model(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    other = ScriptedModel([text_step("a2, again")], name="scripted:other")
    submission = await runtime.regenerate(cid, 4, model=other)
    handle = await submission.handle()
    assert handle.turn.kind == "regenerate" and handle.rows == ()
    await handle.result()
    assert seen(other.requests[0].messages) == ["q1", "a1", "q2"]
    assert await texts(runtime, cid) == ["q1", "a1", "q2", "a2, again"]
    tree = await runtime.store.tree(cid)
    assert tree is not None and tree.siblings(5) == [4, 5] and tree.leaves() == [4, 5]
    # the old answer is one switch away, and the next turn continues that branch
    await runtime.switch_branch(cid, 4)
    assert await texts(runtime, cid) == ["q1", "a1", "q2", "a2"]
    model.add(text_step("a3"))
    await runtime.run_turn(cid, "q3")
    assert seen(model.requests[-1].messages) == ["q1", "a1", "q2", "a2", "q3"]
    assert sorted(await every_branch_valid(runtime.store, cid)) == [
        ["q1", "a1", "q2", "a2", "q3", "a3"],
        ["q1", "a1", "q2", "a2, again"],
    ]


async def test_editing_the_first_message_forks_before_every_row(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    model.add(text_step("fresh"))
    await (await (await runtime.edit(cid, 1, "q1, edited")).handle()).result()
    assert seen(model.requests[-1].messages) == ["q1, edited"]
    assert await texts(runtime, cid) == ["q1, edited", "fresh"]


async def test_bad_requests_are_refused_and_nothing_is_written(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    with pytest.raises(InvalidRequest, match="only a user message can be edited"):
        await runtime.edit(cid, 2, "not an answer")
    with pytest.raises(InvalidRequest, match="regenerate names an answer"):
        await runtime.regenerate(cid, 1)
    with pytest.raises(NotFound):
        await runtime.edit(cid, 99, "nothing there")
    with pytest.raises(NotFound):
        await runtime.regenerate(cid, 0)
    with pytest.raises(NotALeaf, match="leaves: 4"):
        await runtime.switch_branch(cid, 2)
    assert len(await runtime.store.list_messages(cid, branch=WHOLE)) == 4


async def test_a_hidden_row_cannot_be_edited(runtime: Runtime, model: ScriptedModel) -> None:
    model.add(text_step("noted"), text_step("ok"))
    cid = (await runtime.create_conversation()).id
    await runtime.run_turn(cid, "q1")
    hidden = Message("user", (await runtime.store.list_messages(cid))[0].blocks, hidden=True)
    await runtime.run_turn(cid, hidden)
    with pytest.raises(InvalidRequest, match="hidden row"):
        await runtime.edit(cid, 3, "edited")


async def test_an_edit_while_a_turn_runs_follows_the_policy(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    slow = Step((*(TextDelta(f"w{i} ") for i in range(50)), Stop("end_turn")), delay=0.01)
    model.add(slow, text_step("answer to the edit"))
    running = await runtime.start_turn(cid, "q3")
    with pytest.raises(Conflict):
        await runtime.edit(cid, 3, "q2, edited", policy="reject")
    with pytest.raises(Conflict, match="turn is running"):
        await runtime.switch_branch(cid, 4)
    queued = await runtime.edit(cid, 3, "q2, edited")  # queue: it waits its turn
    assert queued.queued is not None
    await running.result()
    await (await queued.handle()).result()
    assert seen(model.requests[-1].messages) == ["q1", "a1", "q2, edited"]
    assert await texts(runtime, cid) == ["q1", "a1", "q2, edited", "answer to the edit"]


async def test_an_edit_of_a_paused_conversation_answers_the_card_in_the_old_branch(
    runtime: Runtime, model: ScriptedModel
) -> None:
    model.add(
        text_step("a1"),
        tool_step(("calculator", {"expression": "1+1"}), ("ask_user", {"question": "Sure?"})),
        text_step("a2 for the edit"),
    )
    cid = (await runtime.create_conversation()).id
    await runtime.run_turn(cid, "q1")
    paused = await runtime.run_turn(cid, "q2")
    assert paused.stop_reason == "paused"
    await (await (await runtime.edit(cid, 3, "q2, edited")).handle()).result()
    assert (await runtime.conversation(cid)).state == "idle"
    branches = await every_branch_valid(runtime.store, cid)  # the card was answered there
    assert ["q1", "a1", "q2, edited", "a2 for the edit"] in branches
    calls = await runtime.store.list_tool_calls(cid)
    assert sorted(c.status for c in calls) == ["dismissed", "ok"]  # calculator ran once
    model.assert_consumed()


async def test_a_switch_of_a_paused_conversation_declines_what_waits(
    runtime: Runtime, model: ScriptedModel
) -> None:
    cid = await two_exchanges(runtime, model)
    model.add(tool_step(("ask_user", {"question": "Which?"})))
    await (await (await runtime.edit(cid, 3, "q2, edited")).handle()).result()
    assert (await runtime.conversation(cid)).state == "paused"
    await runtime.switch_branch(cid, 4)
    assert (await runtime.conversation(cid)).state == "idle"
    assert await texts(runtime, cid) == ["q1", "a1", "q2", "a2"]
    await every_branch_valid(runtime.store, cid)
