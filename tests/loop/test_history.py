"""``loop.history.repair``: whatever the store holds, a provider gets a valid history."""

from __future__ import annotations

from ostinato.loop.history import MISSING_RESULT, repair
from ostinato.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from tests.loop.harness import assert_history_valid


def user(text: str) -> Message:
    return Message("user", (TextBlock(text),))


def calls(*ids: str) -> Message:
    return Message("assistant", tuple(ToolUseBlock(i, "shell", {}) for i in ids))


def results(*pairs: tuple[str, str]) -> Message:
    return Message("tool", tuple(ToolResultBlock(i, text) for i, text in pairs))


def test_a_valid_history_comes_back_as_it_is() -> None:
    history = [user("hi"), calls("a"), results(("a", "ok")), Message("assistant", ())]
    repaired, uses = repair(history)
    assert repaired == history and uses == {"a"}


def test_a_call_with_two_results_keeps_only_the_first() -> None:
    """Two processes that both answered one call (a recovery that took a live server's
    turn for a crashed one, and the live server): one result reaches the provider."""
    unknown = "outcome unknown: the server stopped while this call was running"
    history = [
        user("run it"),
        calls("a", "b"),
        results(("a", unknown), ("b", "b done")),
        results(("a", "the real output")),
        user("and now?"),
    ]
    repaired, uses = repair(history)
    assert_history_valid(repaired)
    answers = [(r.tool_use_id, r.text) for m in repaired for r in m.tool_results]
    assert answers == [("a", unknown), ("b", "b done")]
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "user"]
    assert uses == {"a", "b"}


def test_a_repeated_result_inside_one_message_is_dropped_too() -> None:
    history = [user("x"), calls("a"), results(("a", "first"), ("a", "second"))]
    repaired, _ = repair(history)
    assert [(r.tool_use_id, r.text) for r in repaired[-1].tool_results] == [("a", "first")]


def test_orphans_go_and_missing_results_are_made() -> None:
    history = [user("x"), results(("z", "stray")), calls("a"), user("y")]
    repaired, _ = repair(history)
    assert_history_valid(repaired)
    assert [(r.tool_use_id, r.text) for m in repaired for r in m.tool_results] == [
        ("a", MISSING_RESULT)
    ]
