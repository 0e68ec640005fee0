"""Steering from the page, in Chromium against ``ostinato serve``: while a turn runs the
composer offers "Send now" (Ctrl+Enter: the running turn takes the message at its next
step) beside "After this answer" (Enter: queued), and the waiting messages are listed
above the composer, each editable and withdrawable until a turn takes it."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.web.conftest import shoot
from tests.web.site import Site
from tests.web.test_chat import conversation_id, open_new, send

QUEUED = "Queued: runs after the current reply"


def test_send_now_steers_the_running_turn(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/steps 8")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.get_by_role("button", name="After this answer")).to_be_visible()
    expect(page.locator(".step[data-tool=calculator]").first).to_be_visible()
    box = page.get_by_role("textbox", name="Message")
    box.fill("/say steered in")
    box.press("Control+Enter")  # "Send now", by keyboard
    expect(page.get_by_text("steered in", exact=True)).to_be_visible(timeout=15_000)
    expect(page.get_by_role("button", name="Stop")).to_have_count(0, timeout=15_000)
    expect(page.get_by_text("steps done")).to_have_count(0)
    users = page.locator(".msg.user").all_inner_texts()
    assert len(users) == 2 and "/say steered in" in users[1]
    cid = conversation_id(page)
    turns = site.api("GET", f"/v1/conversations/{cid}/turns")["turns"]
    assert len(turns) == 1  # taken by the running turn, not run as a turn of its own
    page.reload()
    expect(page.get_by_text("/say steered in")).to_be_visible()
    expect(page.get_by_text("steered in", exact=True)).to_be_visible()


def test_waiting_messages_are_edited_and_withdrawn_before_they_run(
    context: Any, site: Site
) -> None:
    page = open_new(context, site)
    send(page, "/steps 12")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    send(page, "/say frist")  # Enter while a turn runs: after this answer
    send(page, "/say never")
    waiting = page.get_by_role("region", name="Waiting messages")
    expect(waiting.get_by_role("listitem")).to_have_count(2)
    expect(waiting.get_by_text(QUEUED)).to_have_count(2)
    shoot(page, "waiting")

    first = waiting.get_by_role("listitem", name="Waiting message: /say frist")
    first.get_by_role("button", name="Edit").focus()
    page.keyboard.press("Enter")
    editor = first.get_by_role("textbox", name="Edit the waiting message")
    expect(editor).to_be_focused()
    editor.fill("/say first")
    editor.press("Enter")
    expect(waiting.get_by_role("listitem", name="Waiting message: /say first")).to_be_visible()

    second = waiting.get_by_role("listitem", name="Waiting message: /say never")
    second.get_by_role("button", name="Withdraw").click()
    expect(waiting.get_by_role("listitem")).to_have_count(1)

    # a second tab of the conversation shows the same waiting message
    other = context.new_page()
    other.goto(page.url)
    expect(
        other.get_by_role("region", name="Waiting messages").get_by_text("/say first")
    ).to_be_visible()
    other.close()

    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_text("first", exact=True)).to_be_visible(timeout=20_000)
    expect(page.get_by_role("region", name="Waiting messages")).to_have_count(0)
    users = page.locator(".msg.user").all_inner_texts()
    assert any("/say first" in u for u in users)
    assert not any("frist" in u or "never" in u for u in users)
