"""The chat page across a server restart in the middle of a stream (it catches up, and
shows every stored row once), with an approval and a question card waiting (both come
back, and can be answered), and on a 2,000-message conversation."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.web.site import Site, fill
from tests.web.test_chat import SHELL, conversation_id, send


def test_a_server_restart_during_a_stream(context: Any, site: Site) -> None:
    cid = site.conversation("Restart")
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    expect(page.get_by_text("Nothing here yet")).to_be_visible()
    box = page.get_by_role("textbox", name="Message")
    box.fill("/slow 400")
    box.press("Enter")
    expect(page.locator(".msg.streaming")).to_contain_text("w5 ")
    site.kill()  # a crash in the middle of the reply
    expect(page.get_by_text("Reconnecting to the server…")).to_be_visible()
    site.start()
    expect(page.get_by_text("Interrupted: the server stopped during this turn.")).to_be_visible(
        timeout=30_000
    )
    expect(page.get_by_text("Reconnecting to the server…")).to_have_count(0)
    box.fill("/say after the restart")
    box.press("Enter")
    expect(page.locator(".msg.assistant", has_text="after the restart")).to_have_count(1)
    expect(page.locator(".msg.user")).to_have_count(2)  # each row once
    seqs = page.locator("[data-seq]").evaluate_all("els => els.map(e => +e.dataset.seq)")
    rows = site.api("GET", f"/v1/conversations/{cid}/messages")["messages"]
    assert seqs == shown_seqs(rows)  # every stored row the page shows, each once, in order


def shown_seqs(rows: list[dict[str, Any]]) -> list[int]:
    """The seqs of the stored rows the page draws: every visible user row, and every
    assistant row with text or a tool call to show (no lookups here)."""
    shown = []
    for row in rows:
        blocks = row["blocks"]
        said = any(b["type"] in ("text", "thinking") and b["text"].strip() for b in blocks)
        called = any(b["type"] == "tool_use" for b in blocks)
        if row["hidden"] or row["role"] not in ("user", "assistant"):
            continue
        if row["role"] == "user" or said or called:
            shown.append(row["seq"])
    return shown


def test_cards_come_back_after_a_server_restart(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, SHELL)
    approve = page.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_visible()
    asking = context.new_page()
    asking.goto(site.url + "/")
    send(asking, '/tool ask_user {"question": "Stay or go?", "options": ["stay", "go"]}')
    question = asking.get_by_role("region", name="Question: Stay or go?")
    expect(question).to_be_visible()
    cids = conversation_id(page), conversation_id(asking)

    site.kill()  # a crash while both wait for a person
    expect(page.get_by_text("Reconnecting to the server…")).to_be_visible()
    site.start()
    expect(page.get_by_text("Reconnecting to the server…")).to_have_count(0, timeout=30_000)
    expect(approve).to_be_visible()  # the open tab still shows it, read again
    for tab in (page, asking):
        tab.reload()
    expect(approve).to_be_visible()
    expect(question).to_be_visible()
    for cid in cids:  # the turns were closed as paused, not lost
        assert site.api("GET", f"/v1/conversations/{cid}")["state"] == "paused"

    approve.click()
    expect(page.locator(".step[data-tool=shell] .step-status")).to_have_text("done")
    expect(page.get_by_text("The tool said:")).to_be_visible()
    question.get_by_role("button", name="go", exact=True).click()
    expect(asking.get_by_text("Stay or go? — Answered: go")).to_be_visible()
    expect(asking.get_by_text("The tool said: go")).to_be_visible()


def test_a_long_conversation_opens_at_its_end(browser: Any, tmp_path_factory: Any) -> None:
    site = Site(tmp_path_factory.mktemp("long"), {})
    cid = fill(site.db, 2_000, "Long")
    site.start()
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    try:
        page = context.new_page()
        page.goto(f"{site.url}/c/{cid}")
        expect(page.get_by_text("message 1999:")).to_be_visible()
        assert page.locator(".msg").count() <= 100  # the newest pages only, at first
        scroller = page.locator(".scroller")
        scroller.evaluate("el => el.scrollTop = 0")
        expect(page.locator(".msg")).not_to_have_count(60)
        # scrolling up reads the older rows a page at a time, down to the first one
        messages = page.locator(".msg")
        while not page.get_by_text("message 0:").count():
            shown = messages.count()
            assert shown < 2_000
            scroller.evaluate("el => el.scrollTop = 0")
            expect(messages).not_to_have_count(shown)  # more came in above
        expect(page.get_by_text("message 0:")).to_be_visible()
        seqs = page.locator("[data-seq]").evaluate_all("els => els.map(e => +e.dataset.seq)")
        assert seqs == sorted(set(seqs)) and len(seqs) == 2_000  # each once, in order
        page.get_by_role("textbox", name="Message").fill('/tool calculator {"expression": "1+1"}')
        page.get_by_role("button", name="Send").click()
        reply = page.locator(".msg.assistant", has_text="The tool returned: 1+1 = 2")
        expect(reply).to_be_visible()
    finally:
        context.close()
        site.stop()
