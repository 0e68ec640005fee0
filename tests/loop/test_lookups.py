"""Steps of ``read`` tools are lookups: hidden from the chat view (``hidden`` rows marked
``lookup``), kept for the model, and there for a client that asks for hidden rows."""

from __future__ import annotations

from ostinato.models.offline import OfflineModel
from ostinato.models.scripted import text_step, tool_step
from tests.loop.harness import Harness


async def test_a_step_of_lookups_only_is_hidden_but_sent_to_the_model() -> None:
    h = Harness(tool_step(("clock", {})), text_step("It is noon."))
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "what time is it?")).stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [(m.role, m.hidden) for m in rows] == [
        ("user", False),
        ("assistant", True),
        ("tool", True),
        ("assistant", False),
    ]
    assert rows[1].metadata == {"lookup": True} and rows[2].metadata == {"lookup": True}
    shown = await h.store.list_messages(cid, include_hidden=False)
    assert [m.text for m in shown] == ["what time is it?", "It is noon."]
    sent = h.model.requests[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool"]  # the model sees them


async def test_a_lookup_with_text_keeps_its_text_visible() -> None:
    h = Harness(tool_step(("clock", {}), text="Let me look at the clock."), text_step("Noon."))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "time?")
    rows = await h.messages(cid)
    assert [(m.role, m.hidden) for m in rows][1:3] == [("assistant", False), ("tool", True)]


async def test_a_step_with_an_action_stays_visible() -> None:
    h = Harness(tool_step(("clock", {}), ("calculator", {"expression": "1+1"})), text_step("Done."))
    cid = await h.conversation()
    await h.runtime.run_turn(cid, "both")
    rows = await h.messages(cid)
    assert not any(m.hidden for m in rows)


async def test_the_offline_model_answers_a_lookup_instead_of_calling_it_again() -> None:
    """It leaves out the seed step (the loop's own), not every hidden row: a lookup's
    hidden results are what it answers."""
    h = Harness()
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "/tool clock {}", model=OfflineModel())
    assert result.stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [(m.role, m.hidden) for m in rows] == [
        ("user", False),
        ("assistant", False),  # "Calling clock." is text: shown
        ("tool", True),
        ("assistant", False),
    ]
    assert rows[-1].text.startswith("The tool returned:")
