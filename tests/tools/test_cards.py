"""The rich cards (``ostinato.tools.cards``) through the loop: ``choose`` and ``ask_form``
pause the turn and the person's answer is the result the model sees; ``suggest_replies``
and ``show`` do not pause; their bad arguments are an error result the model sees."""

from __future__ import annotations

import json

from ostinato.frames import InputRequested
from ostinato.models.scripted import text_step, tool_step
from ostinato.tools.builtins import builtin_tools, default_registry
from ostinato.tools.cards import card_tools
from ostinato.tools.registry import ToolRegistry
from tests.loop.harness import Harness

OPTIONS = [{"id": "opt_a", "label": "Small"}, {"id": "opt_b", "label": "Large"}]
FORM = {
    "title": "Your trip",
    "questions": [
        {"id": "where", "question": "Where to?"},
        {"id": "size", "question": "Which room?", "options": OPTIONS},
    ],
}


def registry() -> ToolRegistry:
    return ToolRegistry([*builtin_tools(), *card_tools()])


async def test_choose_pauses_and_the_chosen_id_goes_back_to_the_model() -> None:
    call = ("choose", {"question": "Which size?", "options": OPTIONS}, "c1")
    h = Harness(tool_step(call, text="Pick one."), tools=registry())
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "book it")).stop_reason == "paused"
    card = next(f for f in h.bus.frames if isinstance(f, InputRequested))
    assert card.name == "choose" and card.input["options"] == OPTIONS
    h.model.add(text_step("Large it is."))
    handle = await h.runtime.answer_card(cid, "c1", {"id": "opt_b"})
    assert (await handle.result()).stop_reason == "end_turn"
    seen = h.model.requests[-1].messages[-1].tool_results[0]
    assert seen.tool_use_id == "c1" and json.loads(seen.text) == {"id": "opt_b"}


async def test_a_form_is_answered_in_one_go() -> None:
    h = Harness(tool_step(("ask_form", FORM, "f1")), tools=registry())
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "plan a trip")).stop_reason == "paused"
    rows = await h.store.list_messages(cid)  # paused: the card has no result yet
    assert rows[-1].metadata["awaiting"] == "f1"
    h.model.add(text_step("Booked."))
    answers = {"answers": {"where": "Lisbon", "size": "opt_a"}}
    await (await h.runtime.answer_card(cid, "f1", answers)).result()
    assert json.loads(h.model.requests[-1].messages[-1].tool_results[0].text) == answers


async def test_suggest_replies_and_show_do_not_pause() -> None:
    show = {
        "title": "Sales",
        "chart": {
            "type": "bar",
            "labels": ["Q1", "Q2"],
            "series": [{"name": "EU", "values": [3, 4.5]}],
        },
    }
    replies = {"replies": ["Yes", "No"]}
    h = Harness(
        tool_step(("show", show, "s1"), ("suggest_replies", replies, "r1")),
        text_step("Here you are."),
        tools=registry(),
    )
    cid = await h.conversation()
    result = await h.runtime.run_turn(cid, "sales?")
    assert result.stop_reason == "end_turn"
    results = {r.tool_use_id: r for r in (await h.messages(cid))[2].tool_results}
    assert not results["s1"].is_error and "chart is shown" in results["s1"].text
    assert not results["r1"].is_error and "2 reply button(s)" in results["r1"].text


async def test_bad_show_or_suggest_arguments_are_an_error_result() -> None:
    bad = [
        ("show", {"title": "nothing to show"}, "b2"),
        ("show", {"table": {"columns": ["a"], "rows": [["<script>"]]}, "html": "<b>"}, "b3"),
        ("suggest_replies", {"replies": ["x"] * 7}, "b4"),
    ]
    h = Harness(tool_step(*bad), text_step("Sorry."), tools=registry())
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "go")).stop_reason == "end_turn"
    assert not any(isinstance(f, InputRequested) for f in h.bus.frames)
    results = (await h.messages(cid))[2].tool_results
    assert [r.is_error for r in results] == [True] * 3
    assert all("invalid arguments" in r.text for r in results)


def test_the_default_registry_has_the_cards() -> None:
    tools = {t.name: t for t in default_registry(workdir=False)}
    assert {n: tools[n].category for n in ("ask_form", "choose", "suggest_replies", "show")} == {
        "ask_form": "ui",
        "choose": "ui",
        "suggest_replies": "action",
        "show": "action",
    }


async def test_choose_or_ask_form_with_bad_arguments_answers_the_model_and_does_not_pause() -> None:
    bad_choose = ("choose", {"question": "Size?", "options": [{"label": "no id"}]}, "c1")
    bad_form = ("ask_form", {"questions": []}, "f1")
    h = Harness(tool_step(bad_choose), tool_step(bad_form), text_step("Sorry."), tools=registry())
    cid = await h.conversation()
    assert (await h.runtime.run_turn(cid, "book it")).stop_reason == "end_turn"
    assert not any(isinstance(f, InputRequested) for f in h.bus.frames)
    results = [r for m in await h.messages(cid) for r in m.tool_results]
    assert [(r.tool_use_id, r.is_error) for r in results] == [("c1", True), ("f1", True)]
