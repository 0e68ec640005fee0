"""The chat page across a server restart in the middle of a stream (it catches up, and
shows nothing twice), and on a 2,000-message conversation."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.web.site import Site, fill


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
    seqs = page.locator("[data-seq]").evaluate_all("els => els.map(e => e.dataset.seq)")
    assert len(seqs) == len(set(seqs))
    rows = site.api("GET", f"/v1/conversations/{cid}/messages")["messages"]
    shown = {str(r["seq"]) for r in rows if r["role"] in ("user", "assistant") and r["blocks"]}
    assert set(seqs) <= shown


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
