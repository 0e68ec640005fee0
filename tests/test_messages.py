"""Canonical blocks and their one serializer."""

from __future__ import annotations

import pytest

from ostinato.messages import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    block_from_json,
    blocks_from_json,
    blocks_to_json,
    message_to_json,
    unanswered_tool_uses,
)

BLOCKS = (
    TextBlock("hello"),
    TextBlock("with data", provider_data={"id": "msg_1"}),
    ThinkingBlock("hmm", signature="sig"),
    ToolUseBlock("c1", "calc", {"expression": "1+1"}),
    ToolResultBlock("c1", "2"),
    ToolResultBlock("c1", (TextBlock("a"), ImageBlock("image/png", data="AAAA")), is_error=True),
    ImageBlock("image/jpeg", url="https://example.com/a.jpg"),
    FileBlock("application/pdf", data="JVBE", name="a.pdf"),
)


def test_round_trip_every_block_type() -> None:
    assert blocks_from_json(blocks_to_json(BLOCKS)) == BLOCKS


def test_wire_shapes_match_the_documented_format() -> None:
    out = blocks_to_json(BLOCKS)
    assert out[0] == {"type": "text", "text": "hello"}
    assert out[2] == {"type": "thinking", "text": "hmm", "signature": "sig"}
    assert out[3] == {
        "type": "tool_use",
        "id": "c1",
        "name": "calc",
        "input": {"expression": "1+1"},
    }
    assert out[4] == {"type": "tool_result", "tool_use_id": "c1", "content": "2", "is_error": False}
    assert out[6] == {
        "type": "image",
        "media_type": "image/jpeg",
        "url": "https://example.com/a.jpg",
    }


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("text", "JSON object"),
        ({"type": "nope"}, "unknown block type"),
        ({"type": "text"}, "'text'"),
        ({"type": "tool_use", "id": "x", "name": "n", "input": []}, "input must be an object"),
        ({"type": "image", "media_type": "image/png"}, "exactly one of"),
        ({"type": "image", "media_type": "image/png", "data": "a", "url": "b"}, "exactly one of"),
        ({"type": "tool_result", "tool_use_id": "x", "content": 3}, "string or a list"),
        (
            {
                "type": "tool_result",
                "tool_use_id": "x",
                "content": [{"type": "thinking", "text": ""}],
            },
            "only text and image",
        ),
    ],
)
def test_malformed_blocks_say_what_is_wrong(raw: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        block_from_json(raw)


def test_message_json_and_helpers() -> None:
    message = Message(
        "assistant", (TextBlock("a"), TextBlock("b"), ToolUseBlock("c9", "t", {})), seq=4
    )
    assert message.text == "ab" and [u.id for u in message.tool_uses] == ["c9"]
    out = message_to_json(message)
    assert out["seq"] == 4 and out["role"] == "assistant" and len(out["blocks"]) == 3
    answered = Message("tool", (ToolResultBlock("c9", "ok"),))
    assert unanswered_tool_uses([message]) == [ToolUseBlock("c9", "t", {})]
    assert unanswered_tool_uses([message, answered]) == []


def test_tool_result_content_is_json_dumps_of_the_value() -> None:
    """The encoder made once writes what ``json.dumps`` with the same options wrote."""
    import json
    from datetime import date
    from decimal import Decimal

    from ostinato.messages import tool_result_content

    values: list[object] = [
        1,
        2.5,
        float("nan"),
        True,
        [1, "é", None],
        {"ü": "日本", "n": {"deep": [1, 2]}, "d": date(2026, 12, 5)},
        Decimal("1.10"),
        ("a", "\u2028"),
    ]
    for value in values:
        assert tool_result_content(value) == json.dumps(value, ensure_ascii=False, default=str)
    assert tool_result_content("as is") == "as is" and tool_result_content(None) == "done"
