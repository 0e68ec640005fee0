"""The history window and token estimates."""

from __future__ import annotations

import pytest

from ostinato.context.catalog import ContextCatalog, parse
from ostinato.context.tokens import TokenEstimator, estimate_each, estimate_message
from ostinato.context.window import build, merge
from ostinato.messages import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from ostinato.models.base import ModelRequest


def row(seq: int, role: str, text: str = "x") -> Message:
    blocks: tuple = (TextBlock(text),)  # type: ignore[type-arg]
    if role == "assistant-tool":
        role, blocks = "assistant", (ToolUseBlock(f"c{seq}", "t", {}),)
    if role == "tool":
        blocks = (ToolResultBlock(f"c{seq - 1}", text),)
    return Message(role, blocks, seq=seq)  # type: ignore[arg-type]


def test_the_window_starts_at_a_turn_boundary() -> None:
    rows = [row(5, "tool"), row(6, "assistant", "answer"), row(7, "user", "q"), row(8, "assistant")]
    window = build(rows)
    assert [m.seq for m in window.messages] == [7, 8]
    assert window.first_seq == 7 and window.dropped == 2


def test_the_token_budget_drops_whole_turns_never_the_newest() -> None:
    rows = []
    for turn in range(5):
        rows += [row(turn * 2 + 1, "user", "a" * 400), row(turn * 2 + 2, "assistant", "b" * 400)]
    assert [m.seq for m in build(rows, max_tokens=500).messages] == [7, 8, 9, 10]
    window = build(rows, max_tokens=100)
    assert [m.seq for m in window.messages] == [9, 10]  # the newest turn stays even if over
    assert build(rows, max_tokens=10_000).first_seq == 1


def test_tool_use_and_result_stay_together() -> None:
    rows = [row(1, "user"), row(2, "assistant-tool"), row(3, "tool"), row(4, "assistant")]
    rows += [row(5, "user", "y" * 4000), row(6, "assistant")]
    window = build(rows, max_tokens=1_200)
    seqs = [m.seq for m in window.messages]
    assert seqs in ([1, 2, 3, 4, 5, 6], [5, 6])


def test_same_role_neighbours_merge_and_the_summary_comes_first() -> None:
    summary = Message("system", (TextBlock("summary"),), hidden=True, metadata={"kind": "summary"})
    rows = [row(3, "user", "one"), row(4, "user", "two"), row(5, "assistant")]
    window = build(rows, summary=summary)
    assert window.messages[0] is summary
    assert [b.text for b in window.messages[1].blocks] == ["one", "two"]  # type: ignore[union-attr]
    assert len(merge([row(1, "tool"), row(2, "tool")])) == 1


def test_estimates_and_calibration() -> None:
    text = Message("user", (TextBlock("a" * 400),))
    assert 100 <= estimate_message(text) <= 110
    image = Message("user", (ImageBlock("image/png", data="AAAA"),))
    assert estimate_message(image) > 1000
    estimator = TokenEstimator()
    request = ModelRequest(system="s", messages=(text,))
    raw = estimator.raw(request)
    for _ in range(20):
        estimator.calibrate("m", raw, raw * 2)
    assert 1.9 < estimator.factor("m") <= 2.0
    assert estimator.request(request, "m") > raw * 1.9
    assert estimator.factor("other") == 1.0


def test_catalog_defaults_overrides_and_bad_specs() -> None:
    catalog = ContextCatalog({"tiny": 2_000})
    assert catalog.window("anthropic:claude-sonnet-4-5") == 200_000
    assert catalog.window("openai:gpt-4.1-mini") == 1_047_576
    assert catalog.window("ollama:tiny-model") == 2_000
    assert catalog.window("ollama:unknown") == 128_000
    assert parse("a=1, b=2") == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="model=tokens"):
        parse("nonsense")


def test_estimate_each_is_estimate_message_of_each_row_kept_or_not() -> None:
    one, two, three = (f"estimate-each-{n}" for n in range(3))  # ids no other test keeps
    rows = [
        Message("user", (TextBlock("a" * 40),), id=one),
        Message("assistant", (TextBlock("b" * 80), ToolUseBlock("c1", "noop", {"i": 1})), id=two),
        Message("tool", (ToolResultBlock("c1", "1"),)),  # no id: never kept
        Message("user", (TextBlock("a" * 44),), id=three),
    ]
    first = estimate_each(rows)  # made (and kept) here
    assert first == [estimate_message(m) for m in rows]
    assert estimate_each(rows) == first  # read back as kept
    grown = Message("assistant", (TextBlock("b" * 80),), id=two)  # same id, fewer blocks
    assert estimate_each([grown]) == [estimate_message(grown)] != [first[1]]
