"""Size-driven compaction in a running turn: summary rows, dropping, provider refusals."""

from __future__ import annotations

from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.errors import ContextTooLong
from ostinato.frames import ContextCompacted
from ostinato.models.scripted import ScriptedModel, error_step, text_step, tool_step
from tests.loop.harness import Harness


def compacting(h: Harness, window: int, summarizer: ScriptedModel) -> None:
    """Give the runtime a tiny context window and a scripted summariser."""
    h.runtime.compactor = Compactor(summarizer, catalog=ContextCatalog({"scripted": window}))


async def filled(h: Harness, turns: int) -> str:
    cid = await h.conversation()
    for i in range(turns):
        await h.runtime.run_turn(cid, f"message {i} " + "words " * 300)
    return cid


async def test_preflight_summarises_older_turns_into_a_stored_watermark() -> None:
    h = Harness(*(text_step(f"reply {i}") for i in range(4)))
    cid = await filled(h, 3)
    summarizer = ScriptedModel([text_step("They talked about messages 0 and 1.")])
    compacting(h, 1_714, summarizer)  # a budget of 1,500: 1,714 less an eighth kept
    result = await h.runtime.run_turn(cid, "and now?")
    assert result.stop_reason == "end_turn"
    frame = next(f for f in h.bus.frames if isinstance(f, ContextCompacted))
    assert frame.method == "summary" and frame.reason == "estimate"
    assert frame.tokens_after < frame.tokens_before
    # the summariser saw a transcript, with tools off
    assert summarizer.requests[0].tool_choice == "none"
    assert "message 1" in summarizer.requests[0].messages[0].text  # cut to its small window
    # the request that followed starts with the summary and keeps the newest earlier turn
    request = h.model.requests[-1]
    assert request.messages[0].metadata["kind"] == "summary"
    assert "messages 0 and 1" in request.messages[0].text
    assert [m.text for m in request.messages if m.role == "user"][-1] == "and now?"
    # everything is still in the store; the summary row is hidden
    visible = await h.store.list_messages(cid, include_hidden=False)
    assert len(visible) == 8 and all(m.metadata.get("kind") != "summary" for m in visible)
    every = await h.messages(cid)
    assert sum(1 for m in every if m.metadata.get("kind") == "summary") == 1
    # the next turn starts from the watermark
    window = await h.store.window(cid, limit=40)
    assert window.summary is not None and window.rows[0].text.startswith("message 2")
    assert result.metrics["tokens_in"] >= 10  # the summary call's tokens count


async def test_a_provider_refusal_compacts_and_retries_once() -> None:
    h = Harness(text_step("one"), text_step("two"))
    cid = await filled(h, 2)
    compacting(h, 1_000_000, ScriptedModel([text_step("summary")]))
    h.model.add(error_step(ContextTooLong("prompt is too long")), text_step("fits now"))
    result = await h.runtime.run_turn(cid, "go")
    assert result.stop_reason == "end_turn"
    frame = next(f for f in h.bus.frames if isinstance(f, ContextCompacted))
    assert frame.reason == "provider"
    h.model.assert_consumed()


async def test_a_second_refusal_fails_the_turn() -> None:
    h = Harness(text_step("one"), text_step("two"))
    cid = await filled(h, 2)
    compacting(h, 1_000_000, ScriptedModel([text_step("summary")]))
    h.model.add(error_step(ContextTooLong("too long")), error_step(ContextTooLong("still")))
    result = await h.runtime.run_turn(cid, "go")
    assert result.stop_reason == "failed" and "context_too_long" in (result.error or "")


async def test_with_nothing_earlier_the_older_steps_of_the_turn_are_dropped() -> None:
    steps = [
        tool_step(("calculator", {"expression": f"{i}+1"}), text=f"step {i} " + "z" * 3_000)
        for i in range(6)
    ]
    h = Harness(*steps, text_step("done"))
    compacting(h, 2_857, ScriptedModel())  # a budget of 2,500: 2,857 less an eighth
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "count")
    assert result.stop_reason == "end_turn"
    frames = [f for f in h.bus.frames if isinstance(f, ContextCompacted)]
    assert frames and all(f.method == "dropped" for f in frames)
    last = h.model.requests[-1]
    uses = {u.id for m in last.messages for u in m.tool_uses}
    results = {r.tool_use_id for m in last.messages for r in m.tool_results}
    assert uses == results  # what was left out went in whole groups
    assert len(await h.messages(cid)) == 14  # nothing left the store


async def test_the_window_caps_the_request_by_message_count() -> None:
    h = Harness(*(text_step(f"r{i}") for i in range(30)), history_messages=10)
    cid = await h.conversation()
    for i in range(30):
        await h.runtime.run_turn(cid, f"m{i}")
    request = h.model.requests[-1]
    assert len(request.messages) <= 11
    assert request.messages[0].role == "user"  # cut at a turn boundary


async def test_a_small_window_keeps_short_turns_as_they_were_said() -> None:
    """A small local model (8,192 tokens) with a system prompt and tools of about 4.2k
    tokens and no max_tokens: the answer keeps an eighth of the window (not 4,096), and
    three short turns are sent as they were said, with no summary call (issue 26)."""
    prompt = "You are a helpful assistant. " * 580  # about 4.2k tokens with the tools
    h = Harness(*(text_step(f"reply {i}") for i in range(3)), system_prompt=prompt)
    summarizer = ScriptedModel()  # any call to it fails the test
    compacting(h, 8_192, summarizer)
    cid = await h.conversation()
    for said in ("My name is Ada.", "I live in London.", "What is my name?"):
        assert (await h.runtime.run_turn(cid, said)).stop_reason == "end_turn"
    assert not [f for f in h.bus.frames if isinstance(f, ContextCompacted)]
    users = [m.text for m in h.model.requests[-1].messages if m.role == "user"]
    assert users == ["My name is Ada.", "I live in London.", "What is my name?"]
    assert summarizer.requests == []


async def test_short_turns_are_not_summarised_when_that_frees_little() -> None:
    """Over budget by the estimate, but the earlier turns are a few tokens: summarising
    them would free nothing (and replace what was said), so they stay."""
    prompt = "You are a helpful assistant. " * 1_100  # the prompt alone nearly fills it
    h = Harness(*(text_step(f"reply {i}") for i in range(3)), system_prompt=prompt)
    summarizer = ScriptedModel([text_step("Ada said things.") for _ in range(2)])
    compacting(h, 8_192, summarizer)
    cid = await h.conversation()
    for said in ("My name is Ada.", "I live in London.", "What is my name?"):
        assert (await h.runtime.run_turn(cid, said)).stop_reason == "end_turn"
    assert summarizer.requests == []  # it would have answered
    users = [m.text for m in h.model.requests[-1].messages if m.role == "user"]
    assert users == ["My name is Ada.", "I live in London.", "What is my name?"]
