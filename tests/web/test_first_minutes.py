"""A new user's first ten minutes on the page, on the model the README's first command
serves (the offline model): issue 26. The walk-through (open the page, type, run a tool,
approve, answer a card, stop, reload) with the keyboard where a person would use it, and
what each step should leave behind: a message sent once, the composer focused, tool
lines that read the same live and after a reload, a card's answer in the words picked."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import pytest
from playwright.sync_api import expect

from ostinato.context.compaction import summary_row
from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store import open_store
from ostinato.store.base import (
    AppendMessage,
    AppendSummary,
    Conversation,
    CreateConversation,
    utcnow,
)
from tests.web.site import Site
from tests.web.test_chat import conversation_id

TICKS = "for i in 1 2 3 4 5 6 7 8 9; do echo tick $i; sleep 1; done"
CHOOSE = {
    "question": "Which plan?",
    "options": [{"id": "a", "label": "Basic"}, {"id": "b", "label": "Premium"}],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    site = Site(tmp_path_factory.mktemp("first"), {})  # no provider: the offline model
    site.start()
    yield site
    site.stop()


def composer(page: Any) -> Any:
    return page.get_by_role("textbox", name="Message")


def type_and_send(page: Any, text: str) -> None:
    """What a person does: type where the focus is and press Enter (no click first)."""
    expect(composer(page)).to_be_focused()
    page.keyboard.insert_text(text)
    page.keyboard.press("Enter")


def user_rows(site: Site, cid: str) -> list[str]:
    rows = site.api("GET", f"/v1/conversations/{cid}/messages")["messages"]
    return [r["blocks"][0]["text"] for r in rows if r["role"] == "user"]


def calls(site: Site, cid: str) -> dict[str, dict[str, Any]]:
    records = site.api("GET", f"/v1/conversations/{cid}/tool-calls")["tool_calls"]
    return {c["id"]: c for c in records}


def test_a_new_user_s_first_ten_minutes(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, "hello")  # the composer has the focus on a fresh page
    expect(page.locator(".msg.assistant").first).to_contain_text("offline")
    cid = conversation_id(page)

    type_and_send(page, '/tool shell {"command": "echo hi > greeting"}')  # focus kept
    card = page.get_by_role("region", name="Approval needed: shell")
    expect(card).to_be_focused()
    page.keyboard.press("Tab")  # to the card's first button, Approve
    page.keyboard.press("Enter")
    expect(page.locator(".step[data-tool=shell] .step-status")).to_have_text("done")

    type_and_send(page, "/tool choose " + json.dumps(CHOOSE))  # the focus came back
    question = page.get_by_role("region", name="Question: Which plan?")
    expect(question).to_be_focused()
    question.get_by_role("button", name="Basic").click()
    expect(page.get_by_text("Which plan? — Answered: Basic")).to_be_visible()

    type_and_send(page, "/tool shell " + json.dumps({"command": TICKS}))  # focus again
    page.get_by_role("button", name="Approve", exact=True).click()
    step = page.locator(".step[data-tool=shell]").last
    expect(step.locator(".step-status")).to_have_text("running")
    page.wait_for_timeout(2500)  # a person watches it tick for a moment
    expect(composer(page)).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_text("Stopped: the turn was cancelled.")).to_be_visible()
    expect(step.locator(".step-status")).to_have_text("interrupted")
    live_time = step.locator(".step-time").inner_text()
    assert live_time.endswith(" s"), live_time  # it ran for seconds, not "0 ms"
    step.locator("summary").click()
    expect(step.locator(".step-result")).to_contain_text("tick 1")

    lines = page.locator(".step summary").all_inner_texts()
    page.reload()
    expect(page.locator(".step")).to_have_count(len(lines))
    expect(page.get_by_text("Stopped: the turn was cancelled.")).to_be_visible()
    assert page.locator(".step summary").all_inner_texts() == lines  # as it read live
    expect(page.get_by_text("Which plan? — Answered: Basic")).to_be_visible()
    expect(composer(page)).to_be_focused()
    assert user_rows(site, cid)[0] == "hello"
    assert len(user_rows(site, cid)) == 4


def test_a_first_message_is_sent_once(context: Any, site: Site) -> None:
    other = site.conversation("another conversation")
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, '/tool calculator {"expression": "1+1"}')
    expect(page.get_by_text("The tool returned: 1+1 = 2")).to_be_visible()
    cid = conversation_id(page)
    for _ in range(3):  # to another conversation and back, by the list
        page.get_by_role("navigation").get_by_role(
            "link", name="another conversation", exact=True
        ).click()
        expect(page).to_have_url(re.compile(f"/c/{other}$"))
        # by its address: its title is the model's, made after the first answer
        page.get_by_role("navigation").locator(f'a[href="/c/{cid}"]').click()
        expect(page).to_have_url(re.compile(f"/c/{cid}$"))
        expect(page.locator(".msg.user")).to_have_count(1)
    page.go_back()
    page.go_forward()
    expect(page.get_by_text("The tool returned: 1+1 = 2")).to_be_visible()
    assert user_rows(site, cid) == ['/tool calculator {"expression": "1+1"}']


def test_the_composer_has_the_focus_after_new_conversation(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, "first")
    conversation_id(page)
    expect(composer(page)).to_be_focused()  # after the move to /c/<id>
    page.get_by_role("button", name="New conversation").click()
    expect(page).to_have_url(re.compile(r"/$"))
    type_and_send(page, "second")
    expect(page.locator(".msg.user")).to_have_text(["second"])


def test_a_declined_call_reads_the_same_after_a_reload(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, '/tool shell {"command": "date"}')
    page.get_by_role("button", name="Decline").click()
    step = page.locator(".step[data-tool=shell]")
    expect(step.locator(".step-status")).to_have_text("refused")
    cid = conversation_id(page)
    (record,) = [c for c in calls(site, cid).values() if c["name"] == "shell"]
    assert record["status"] == "refused"
    live = step.inner_text()
    type_and_send(page, "and now?")  # the row is no longer the latest
    expect(page.locator(".msg.user")).to_have_count(2)
    page.reload()
    expect(step.locator(".step-status")).to_have_text("refused")
    assert step.inner_text() == live
    assert "step-refused" in (step.get_attribute("class") or "")


def test_an_unknown_conversation_says_so_with_a_way_back(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/c/no-such-conversation")
    expect(page.get_by_role("heading", name="No such conversation")).to_be_visible()
    page.get_by_role("link", name="Start a new conversation").click()
    expect(page).to_have_url(re.compile(r"/$"))
    type_and_send(page, "back on track")
    expect(page.locator(".msg.user")).to_have_text(["back on track"])


def test_a_failed_show_draws_nothing_but_its_failed_line(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, "/tool show " + json.dumps({"title": "Sales", "table": {"rows": 3}}))
    step = page.locator(".step[data-tool=show]")
    expect(step.locator(".step-status")).to_have_text("failed")
    expect(page.get_by_role("region", name="Sales")).to_have_count(0)
    expect(page.locator(".show-title")).to_have_count(0)


def test_the_timeline_s_times_stay_on_one_line(context: Any, site: Site) -> None:
    page = context.new_page()
    page.set_viewport_size({"width": 760, "height": 800})
    page.goto(site.url + "/")
    type_and_send(page, '/tool calculator {"expression": "2*(3+4)"}')
    reply = page.locator(".msg.assistant", has_text="The tool returned: 2*(3+4) = 14")
    reply.get_by_role("button", name="Timeline").click()
    times = reply.locator(".tt-at, .tt-dur")
    expect(times.first).to_be_visible()
    wrapped = times.evaluate_all(
        "els => els.filter(el => el.getClientRects().length > 1 ||"
        " el.offsetHeight > 1.5 * parseFloat(getComputedStyle(el).lineHeight))"
        ".map(el => el.textContent)"
    )
    assert wrapped == []


TURNS: list[tuple[Literal["user", "assistant"], str]] = [
    ("user", "My name is Ada."),
    ("assistant", "Nice to meet you."),
    ("user", "Noted."),
    ("assistant", "Hi Ada."),
    ("user", "What is my name?"),
    ("assistant", "Ada."),
]


def summarised(db_url: str) -> str:
    """Three turns, the first two summarised (as compaction leaves them): the store's
    window then starts after the summary's watermark."""

    async def write() -> str:
        store = await open_store(db_url)
        try:
            now = utcnow()
            conversation = Conversation(new_id(), "idle", now, now, title="summarised")
            await store.write(CreateConversation(conversation))
            for role, said in TURNS:
                row = AppendMessage(conversation.id, Message(role, (TextBlock(said),)))
                await store.write(row)
            await store.write(AppendSummary(conversation.id, summary_row("Ada said hi.", 4), 4))
            return str(conversation.id)
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps a loop on this thread
        return pool.submit(asyncio.run, write()).result()


def test_a_reload_after_a_summary_shows_what_was_shown_live(context: Any, site: Site) -> None:
    cid = summarised(site.db)
    assert len(site.api("GET", f"/v1/conversations/{cid}/messages?newest=150")["messages"]) == 2
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    expect(page.locator(".msg.user")).to_have_text(
        ["My name is Ada.", "Noted.", "What is my name?"]
    )
    expect(page.locator(".msg.assistant")).to_have_count(3)


def test_the_page_offers_the_models_and_agents_the_caller_may_choose(
    context: Any, site: Site
) -> None:
    listed = site.api("GET", "/v1/models")["data"]
    extra = [(m["id"], m["ostinato"]) for m in listed]
    models = [name for name, said in extra if said.get("choosable") and "agent" not in said]
    assert models
    page = context.new_page()
    page.goto(site.url + "/")
    type_and_send(page, "hello")
    cid = conversation_id(page)
    picker = page.get_by_role("combobox", name="Model or agent")
    expect(picker).to_have_value("")  # the default
    offered = picker.locator("optgroup[label=Models] option")
    expect(offered).to_have_count(len(models))
    picker.select_option(f"model:{models[-1]}")
    expect(picker).to_have_value(f"model:{models[-1]}")
    assert site.api("GET", f"/v1/conversations/{cid}")["metadata"]["model"] == models[-1]
    page.reload()
    expect(picker).to_have_value(f"model:{models[-1]}")
    picker.select_option("")
    expect(picker).to_have_value("")
    assert "model" not in site.api("GET", f"/v1/conversations/{cid}")["metadata"]
