"""Token counts in a turn's metrics: who counted them is said, and a call whose provider
sent no counts is estimated, never counted as zero."""

from __future__ import annotations

from ostinato.loop.metrics import TurnMetrics
from ostinato.models.base import Stop, TextDelta, Usage
from ostinato.models.scripted import Step, text_step
from tests.loop.harness import Harness

NO_USAGE = Step((TextDelta("Paris is the capital of France."), Stop("end_turn")))


async def test_a_call_without_usage_is_estimated_and_said_to_be() -> None:
    h = Harness(NO_USAGE)
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "What is the capital of France?")
    assert result.stop_reason == "end_turn"
    assert result.metrics["tokens_source"] == "estimate"
    assert result.metrics["tokens_in"] > 0 and result.metrics["tokens_out"] > 0
    rows = await h.messages(cid)
    assert rows[-1].metadata["metrics"]["tokens_source"] == "estimate"  # the stored block


async def test_counts_from_the_provider_say_so() -> None:
    h = Harness(text_step("Hi.", usage=Usage(12, 4)))
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "hi")
    assert result.metrics["tokens_source"] == "provider"
    assert (result.metrics["tokens_in"], result.metrics["tokens_out"]) == (12, 4)


def test_the_source_of_a_turn_with_several_calls() -> None:
    metrics = TurnMetrics()
    assert metrics.snapshot()["tokens_source"] == "none"
    metrics.model_call(Usage(10, 2))
    assert metrics.snapshot()["tokens_source"] == "provider"
    metrics.model_call(Usage(30, 5, source="estimate"))
    assert metrics.snapshot()["tokens_source"] == "mixed"
    only_estimates = TurnMetrics()
    only_estimates.model_call(Usage(30, 5, source="estimate"))
    only_estimates.compaction(Usage(0, 0, source="unknown"))
    assert only_estimates.snapshot()["tokens_source"] == "estimate"
