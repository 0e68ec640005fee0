"""Compaction end to end on every engine: a runtime with a tiny context window stores a
summary row, and the next turn's request starts from that watermark."""

from __future__ import annotations

from ostinato.context.catalog import ContextCatalog
from ostinato.context.compaction import Compactor
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store import Store


async def test_a_summary_written_by_a_turn_is_the_next_turns_watermark(store: Store) -> None:
    model = ScriptedModel([text_step(f"reply {i}") for i in range(5)])
    runtime = Runtime(store, model=model, seed_recall=False)
    try:
        cid = (await runtime.create_conversation()).id
        for i in range(3):
            await runtime.run_turn(cid, f"message {i} " + "words " * 300)
        summarizer = ScriptedModel([text_step("They talked about messages 0 and 1.")])
        runtime.compactor = Compactor(summarizer, catalog=ContextCatalog({"scripted": 1_714}))
        result = await runtime.run_turn(cid, "and now?")
        assert result.stop_reason == "end_turn"

        window = await store.window(cid, limit=40)
        assert window.summary is not None and window.summary.hidden
        assert window.summary.metadata["kind"] == "summary"
        assert "messages 0 and 1" in window.summary.text
        through = window.summary.metadata["through_seq"]
        assert all((m.seq or 0) > through for m in window.rows)
        assert window.rows[0].text.startswith("message 2") and not window.more
        assert all(m.metadata.get("kind") != "summary" for m in window.rows)
        # the request after the compaction began with the summary
        assert model.requests[-1].messages[0].metadata["kind"] == "summary"
        # nothing left the store; the summary row is hidden from the chat view
        visible = await store.list_messages(cid, include_hidden=False)
        assert len(visible) == 8

        await runtime.run_turn(cid, "one more")
        assert model.requests[-1].messages[0].text == window.summary.text
    finally:
        await runtime.close()
