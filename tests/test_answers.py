"""Typed answers to what waits: approvals by yes / no / always, cards by option."""

from __future__ import annotations

from ostinato.answers import (
    AnswerCard,
    Decide,
    Typed,
    WaitingApproval,
    WaitingCard,
    describe,
    interpret,
)

SHELL = WaitingApproval("ap1", "tu1", "shell", {"command": "ls"}, "exec", family="ls")
WRITE = WaitingApproval("ap2", "tu2", "write_file", {"path": "a"}, "write")
COLOUR = WaitingCard("tu3", "ask_user", {"question": "Which colour?", "options": ["Red", "Blue"]})


def test_yes_no_and_always_decide_an_approval() -> None:
    for word in ("y", "Yes", "yes!", "OK.", "approve", "go ahead"):
        assert interpret(word, SHELL) == Decide("ap1", True)
    for word in ("n", "No.", "decline", "stop"):
        assert interpret(word, SHELL) == Decide("ap1", False)
    assert interpret("always", SHELL) == Decide("ap1", True, "family")
    assert interpret("always", WRITE) == Decide("ap2", True, "exact")  # no family
    assert interpret("what does ls do?", SHELL) == Typed()


def test_an_option_by_its_text_or_number_answers_a_card() -> None:
    assert interpret("blue", COLOUR) == AnswerCard("tu3", "Blue")
    assert interpret("1", COLOUR) == AnswerCard("tu3", "Red")
    assert interpret("green", COLOUR) == Typed()
    assert interpret("3", COLOUR) == Typed()
    several = WaitingCard(
        "t", "ask_user", {"question": "q", "options": ["a", "b"], "multiple": True}
    )
    assert interpret("a, b", several) == AnswerCard("t", ["a", "b"])
    assert interpret("b and a", several) == AnswerCard("t", ["b", "a"])


def test_free_text_cards_take_the_message_and_choose_sends_ids() -> None:
    free = WaitingCard("t", "ask_user", {"question": "Your name?"})
    assert interpret("  Ann ", free) == AnswerCard("t", "Ann")
    choose = WaitingCard(
        "c", "choose", {"question": "q", "options": [{"id": "p1", "label": "Plan one"}]}
    )
    assert interpret("plan one", choose) == AnswerCard("c", {"id": "p1"})
    assert interpret("p1", choose) == AnswerCard("c", {"id": "p1"})
    assert interpret("anything", WaitingCard("f", "ask_form", {"questions": []})) == Typed()
    assert interpret("hello", None) == Typed()


def test_describe_says_how_to_answer() -> None:
    assert "Answer yes to allow it" in describe(SHELL) and "shell" in describe(SHELL)
    assert "Reply with one of: 1. Red; 2. Blue." in describe(COLOUR)
