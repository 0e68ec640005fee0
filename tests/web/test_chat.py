"""The chat page in a real browser against ``ostinato serve``: the issue's walk-through
(approve a shell call, reload in the middle of a second one, a second tab that follows),
cards in two tabs, stop, queue, files, hostile Markdown, rich cards, retries, and the
conversation as a tree (edit, regenerate, "< 2/3 >")."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import expect

from tests.web.conftest import shoot
from tests.web.site import Site

SHELL = '/tool shell {"command": "ls"}'


def open_new(context: Any, site: Site) -> Any:
    page = context.new_page()
    page.goto(site.url + "/")
    return page


def send(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def conversation_id(page: Any) -> str:
    page.wait_for_url(re.compile(r"/c/"))
    return str(page.url.rsplit("/c/", 1)[1])


def test_approve_reload_and_a_second_tab(context: Any, site: Site) -> None:
    page = open_new(context, site)
    expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()
    send(page, SHELL)
    approve = page.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_visible()
    expect(page.get_by_role("region", name="Approval needed: shell")).to_be_focused()
    shoot(page, "approval")
    approve.click()
    step = page.locator(".step[data-tool=shell]")
    expect(step.locator(".step-status")).to_have_text("done")
    expect(page.get_by_text("The tool said:")).to_be_visible()
    step.locator("summary").click()
    expect(step.locator(".step-result")).to_contain_text("exit_code")
    shoot(page, "timeline")

    # a second such card, then a reload in its middle: it is still there
    send(page, SHELL)
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    page.reload()
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    expect(page.locator(".msg.user")).to_have_count(2)

    # a second tab shows the same conversation and moves as the first one sends
    other = context.new_page()
    other.goto(page.url)
    expect(other.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(other.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(other.locator(".step[data-tool=shell] .step-status")).to_have_text(["done", "done"])
    send(page, "/say hello from the first tab")
    expect(other.get_by_text("hello from the first tab").last).to_be_visible()
    expect(other.locator(".msg.user")).to_have_count(3)
    expect(page.locator(".msg.user")).to_have_count(3)  # its own bubble once, not twice


def test_two_tabs_answer_the_same_card(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, '/tool ask_user {"question": "Which colour?", "options": ["red", "blue"]}')
    card = page.get_by_role("region", name="Question: Which colour?")
    expect(card).to_be_focused()
    other = context.new_page()
    other.goto(page.url)
    expect(other.get_by_role("button", name="blue", exact=True)).to_be_visible()
    other.get_by_role("button", name="blue", exact=True).click()
    expect(card).to_have_count(0)  # closed in the tab that did not answer
    expect(page.get_by_text("Which colour? — Answered: blue")).to_be_visible()
    expect(other.get_by_text("The tool said:")).to_be_visible()


def test_two_tabs_approving_the_same_call_run_it_once(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, '/tool shell {"command": "echo once"}')
    other = context.new_page()
    expect(page.get_by_role("button", name="Decline")).to_be_visible()
    other.goto(page.url)
    expect(other.get_by_role("button", name="Decline")).to_be_visible()
    click = "document.querySelector('.approval button.primary')?.click()"
    page.evaluate(click)  # both at once: one decision wins, the other is a 409
    other.evaluate(click)
    for tab in (page, other):
        expect(tab.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
        expect(tab.locator(".step-status")).to_have_text("done")
    cid = conversation_id(page)
    endings = [
        a["ending"] for a in site.api("GET", f"/v1/conversations/{cid}/approvals")["approvals"]
    ]
    assert endings == ["APPROVED"]


def test_stop_during_a_long_tool(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, '/tool shell {"command": "sleep 60", "timeout": 120}')
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".step-status")).to_have_text("running")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_text("Stopped: the turn was cancelled.")).to_be_visible()
    expect(page.locator(".step-status")).to_have_text("interrupted")
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    page.reload()
    expect(page.get_by_text("Stopped: the turn was cancelled.")).to_be_visible()
    expect(page.locator(".step-status")).to_have_text("interrupted")


def test_a_message_sent_while_a_turn_runs_is_queued(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/slow 40")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    send(page, "/say after the slow one")
    expect(page.get_by_text("Queued: runs after the current reply")).to_be_visible()
    expect(page.get_by_text("after the slow one").last).to_be_visible(timeout=30_000)
    expect(page.get_by_text("Queued: runs after the current reply")).to_have_count(0)
    texts = page.locator(".msg").all_inner_texts()
    assert texts.index(next(t for t in texts if "w39" in t)) < texts.index(texts[-1])


def test_a_hostile_reply_runs_nothing(context: Any, site: Site) -> None:
    page = open_new(context, site)
    page.evaluate("window.__pwned = 0")
    hostile = (
        '<img src=x onerror="window.__pwned=1"> [click](javascript:window.__pwned=2) '
        '<script>window.__pwned=3</script> <a href="javascript:window.__pwned=4">a</a> '
        '<iframe src="javascript:window.__pwned=5"></iframe> **bold** `code`'
    )
    send(page, "/say " + hostile)
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("strong")).to_have_text("bold")
    for link in reply.locator("a").all():
        assert not (link.get_attribute("href") or "").lower().startswith("javascript")
        link.click(modifiers=["Shift"], no_wait_after=True)
    assert reply.locator("script, iframe, [onerror]").count() == 0
    assert page.evaluate("window.__pwned") == 0


def test_markdown_code_and_metrics(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(
        page, "/say # Title\n\nSome *text* and a list:\n\n- one\n- two\n\n```python\nprint(1)\n```"
    )
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("h1")).to_have_text("Title")
    expect(reply.locator("pre code")).to_have_text("print(1)")
    expect(reply.locator("li")).to_have_count(2)
    reply.get_by_role("button", name="Details").click()
    expect(reply.locator(".metrics-list")).to_contain_text("Tokens")


def test_rich_cards(context: Any, site: Site) -> None:
    page = open_new(context, site)
    options = [{"id": "opt_s", "label": "Small"}, {"id": "opt_l", "label": "Large"}]
    send(page, "/tool choose " + json.dumps({"question": "Size?", "options": options}))
    page.get_by_role("button", name="Large", exact=True).click()
    expect(page.get_by_text('The tool said: {"id": "opt_l"}')).to_be_visible()

    form = {
        "title": "Trip",
        "questions": [
            {"id": "where", "question": "Where to?"},
            {"id": "room", "question": "Which room?", "options": options},
        ],
    }
    send(page, "/tool ask_form " + json.dumps(form))
    card = page.get_by_role("region", name="Trip")
    expect(card).to_contain_text("Step 1 of 2")
    card.get_by_role("textbox").fill("Lisbon")
    card.get_by_role("button", name="Next").click()
    expect(card).to_contain_text("Step 2 of 2")
    shoot(page, "form")
    card.get_by_role("button", name="Small").click()
    expect(page.get_by_text('"where": "Lisbon", "room": "opt_s"').first).to_be_visible()

    table = {
        "title": "Sales",
        "table": {"columns": ["Q", "EUR"], "rows": [["Q1", 3], ["<b>Q2</b>", 4]]},
    }
    send(page, "/tool show " + json.dumps(table))
    expect(page.get_by_role("cell", name="<b>Q2</b>")).to_be_visible()  # text, not markup
    chart = {"chart": {"type": "bar", "labels": ["a", "b"], "series": [{"values": [1, 2]}]}}
    send(page, "/tool show " + json.dumps(chart))
    expect(page.locator(".show-chart rect")).to_have_count(2)

    send(page, "/tool suggest_replies " + json.dumps({"replies": ["/say chip one", "Nope"]}))
    chips = page.get_by_role("group", name="Suggested replies")
    expect(chips).to_be_visible()
    shoot(page, "cards")
    chips.get_by_role("button", name="/say chip one").click()
    expect(page.locator(".md", has_text="chip one")).to_be_visible()
    expect(page.get_by_role("group", name="Suggested replies")).to_have_count(0)


def test_files_by_picker_and_by_drop(context: Any, site: Site, tmp_path: Any) -> None:
    page = open_new(context, site)
    note = tmp_path / "plan.md"
    note.write_text("# The plan\nbuild it")
    page.locator("input[type=file][multiple]").set_input_files(str(note))
    expect(page.get_by_role("list", name="Files to send")).to_contain_text("plan.md")
    send(page, "/say got it")
    conversation_id(page)
    expect(page.locator(".msg.user .attachment-file")).to_have_text("plan.md")
    expect(page.locator(".msg.assistant", has_text="got it")).to_be_visible()
    data = page.evaluate_handle(
        "() => { const d = new DataTransfer();"
        " d.items.add(new File(['a,b\\n1,2'], 'table.csv', {type: 'text/csv'})); return d; }"
    )
    page.dispatch_event("section.conversation", "drop", {"dataTransfer": data})
    expect(page.get_by_role("list", name="Files to send")).to_contain_text("table.csv")
    send(page, "/say the csv")
    expect(page.locator(".msg.user .attachment-file").last).to_have_text("table.csv")


def test_lookups_hidden_unless_asked_and_retries_in_place(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/tool clock {}")
    # (in the conversation: the title made after the turn may quote the answer)
    expect(page.locator(".messages").get_by_text("The tool said:")).to_be_visible()
    expect(page.locator(".step[data-tool=clock]")).to_have_count(0)
    page.get_by_label("Show lookups").check()
    expect(page.locator(".step[data-tool=clock]")).to_have_count(1)
    page.get_by_label("Show lookups").uncheck()
    send(page, "/busy done after a retry")
    expect(
        page.get_by_text(re.compile(r"The provider is busy .* retrying in \d+ s"))
    ).to_be_visible()
    expect(page.get_by_text("done after a retry")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile("The provider is busy"))).to_have_count(0)


def test_a_message_from_another_surface_appears(context: Any, site: Site) -> None:
    cid = site.conversation("From curl")
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    expect(page.get_by_role("link", name=re.compile("^From curl"))).to_be_visible()
    expect(page.get_by_text("Nothing here yet")).to_be_visible()
    site.api("POST", f"/v1/conversations/{cid}/turns", {"text": "/say sent with curl"})
    expect(page.locator(".msg.user")).to_have_text("/say sent with curl")
    expect(page.locator(".msg.assistant")).to_contain_text("sent with curl")


def test_phone_width_and_dark(browser: Any, site: Site) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 780}, color_scheme="dark")
    try:
        page = context.new_page()
        page.goto(site.url + "/")
        nav = page.get_by_role("navigation", name="Conversations")
        expect(nav).to_be_hidden()
        send(page, "/say small screens work")
        expect(page.locator(".msg.assistant", has_text="small screens work")).to_be_visible()
        shoot(page, "phone-dark")
        toggle = page.get_by_role("button", name="Conversations")
        toggle.click()
        expect(nav).to_be_visible()
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(21, 23, 26)"
    finally:
        context.close()


def test_rename_a_conversation(context: Any, site: Site) -> None:
    cid = site.conversation("Old name")
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    nav = page.get_by_role("navigation", name="Conversations")
    nav.get_by_role("button", name="Rename Old name").click()
    title = nav.get_by_role("textbox", name="New title")
    expect(title).to_be_focused()
    title.fill("Trip to Lisbon")
    title.press("Enter")
    expect(nav.get_by_role("link", name="Trip to Lisbon", exact=True)).to_be_visible()
    expect(nav.get_by_role("link", name="Old name", exact=True)).to_have_count(0)
    assert site.api("GET", f"/v1/conversations/{cid}")["title"] == "Trip to Lisbon"
    page.reload()  # stored, not only shown
    expect(nav.get_by_role("link", name="Trip to Lisbon", exact=True)).to_be_visible()

    nav.get_by_role("button", name="Rename Trip to Lisbon").click()
    title.fill("x" * 501)  # too long: refused by the server, and the refusal shown in place
    title.press("Enter")
    expect(nav.get_by_role("alert")).to_contain_text("500")
    title.press("Escape")
    expect(nav.get_by_role("link", name="Trip to Lisbon", exact=True)).to_be_visible()
    assert site.api("GET", f"/v1/conversations/{cid}")["title"] == "Trip to Lisbon"


def test_edit_regenerate_and_switch_versions(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/count")
    answer = page.locator(".msg.assistant .md").last
    expect(answer).to_contain_text(re.compile(r"answer \d+"))
    first = answer.inner_text().strip()
    page.get_by_role("button", name="Regenerate answer").click()
    expect(answer).not_to_contain_text(first)
    second = answer.inner_text().strip()
    versions = page.locator(".row-tools.answer .versions")
    expect(versions).to_contain_text("2/2")

    # by keyboard: the previous version, then a second tab shows it too
    page.get_by_role("button", name="Previous version").focus()
    page.keyboard.press("Enter")
    expect(versions).to_contain_text("1/2")
    expect(answer).to_have_text(first)
    other = context.new_page()
    other.goto(page.url)
    expect(other.locator(".msg.assistant .md").last).to_have_text(first)

    # an edit of the message: a new version of it, answered; the other tab follows
    page.get_by_role("button", name="Edit message").click()
    box = page.get_by_role("textbox", name="Edit your message")
    expect(box).to_be_focused()
    box.fill("/say edited and asked again")
    box.press("Enter")
    expect(page.locator(".msg.user")).to_have_text(["/say edited and asked again"])
    expect(answer).to_have_text("edited and asked again")
    user_versions = page.locator(".msg-wrap.user .versions")
    expect(user_versions).to_contain_text("2/2")
    expect(other.locator(".msg.assistant .md").last).to_have_text("edited and asked again")
    expect(other.locator(".msg.user")).to_have_text(["/say edited and asked again"])

    # a reload shows the same branch; back to the first version goes to its newest answer
    page.reload()
    expect(user_versions).to_contain_text("2/2")
    expect(answer).to_have_text("edited and asked again")
    page.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg.user")).to_have_text(["/count"])
    expect(answer).to_have_text(second)
    expect(page.locator(".versions")).to_have_text(["<1/2>", "<2/2>"])
    expect(other.locator(".msg.assistant .md").last).to_have_text(second)
