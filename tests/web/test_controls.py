"""The chat page in Chromium, more of what issue 12 lists: "Approve and remember" (the
grant covers the next call), multiple-choice and free-text questions, the older
conversations, Shift+Enter and the Stop button, a tool's live "still running" line, a
sub-agent streaming in its own timeline, thinking collapsed, images shown, an error and
the failed and budget stop reasons, messages from the terminal and the Python client,
light mode."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import time
import zlib
from typing import Any

from playwright.sync_api import expect

from ostinato.client import Client
from tests.web.provider import WRAP_UP
from tests.web.site import Site
from tests.web.test_chat import SHELL, conversation_id, open_new, send


def _png(width: int, height: int) -> bytes:
    """A PNG of ``width`` x ``height`` red pixels, so an image that is drawn has a size."""

    def part(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + part(b"IHDR", header)
        + part(b"IDAT", zlib.compress(rows))
        + part(b"IEND", b"")
    )


def test_approve_and_remember_covers_the_next_call(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, SHELL)
    page.get_by_role("button", name="Approve and remember").click()
    steps = page.locator(".step[data-tool=shell] .step-status")
    expect(steps).to_have_text(["done"])
    expect(page.get_by_text("The tool said:")).to_have_count(1)
    send(page, SHELL)  # the same call again: the grant answers, no card
    expect(steps).to_have_text(["done", "done"])
    expect(page.get_by_text("The tool said:")).to_have_count(2)
    expect(page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    cid = conversation_id(page)
    first, second = site.api("GET", f"/v1/conversations/{cid}/approvals")["approvals"]
    assert first["ending"] == "APPROVED" and first["remember"] != "none"  # asked once
    assert second["ending"] == "APPROVED" and second["decided_by"].startswith("grant ")
    calls = site.api("GET", f"/v1/conversations/{cid}/tool-calls")["tool_calls"]
    assert [c["status"] for c in calls if c["name"] == "shell"] == ["ok", "ok"]


def test_multiple_choice_and_free_text_questions(context: Any, site: Site) -> None:
    page = open_new(context, site)
    question = {"question": "Which days?", "options": ["Mon", "Tue", "Wed"], "multiple": True}
    send(page, "/tool ask_user " + json.dumps(question))
    card = page.get_by_role("region", name="Question: Which days?")
    expect(card).to_be_focused()
    answer = card.get_by_role("button", name="Answer")
    expect(answer).to_be_disabled()  # nothing picked yet
    card.get_by_label("Mon").check()
    card.get_by_label("Wed").check()
    answer.click()
    expect(card).to_have_count(0)
    expect(page.get_by_text("Which days? — Answered: Mon, Wed")).to_be_visible()
    expect(page.get_by_text(re.compile(r"The tool said: \[.Mon., .Wed.\]"))).to_be_visible()

    send(page, "/tool ask_user " + json.dumps({"question": "Your name?"}))
    box = page.get_by_role("textbox", name="Answer: Your name?")
    expect(box).to_be_visible()
    box.fill("Ada Lovelace")
    box.press("Enter")
    expect(page.get_by_text("Your name? — Answered: Ada Lovelace")).to_be_visible()
    expect(page.get_by_text("The tool said: Ada Lovelace")).to_be_visible()


def test_older_conversations_come_a_page_at_a_time(context: Any, site: Site) -> None:
    for i in range(55):
        site.conversation(f"Paged {i:02d}")
    total = _count_conversations(site)
    assert total > 50
    page = open_new(context, site)
    nav = page.get_by_role("navigation", name="Conversations")
    entries = nav.locator(".conversation-list li")
    expect(entries).to_have_count(50)  # the first page, newest first
    expect(entries.first).to_contain_text("Paged 54")
    nav.get_by_role("button", name="Older conversations").click()
    expect(entries).to_have_count(min(total, 100))
    titles = [t for t in entries.locator(".title").all_inner_texts() if "Paged" in t]
    assert sorted(titles) == [f"Paged {i:02d}" for i in range(55)]  # every one, each once


def test_shift_enter_adds_a_line(context: Any, site: Site) -> None:
    page = open_new(context, site)
    box = page.get_by_role("textbox", name="Message")
    box.click()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    expect(page.locator(".msg.user")).to_have_count(0)  # nothing sent yet
    page.keyboard.press("Enter")
    expect(page.locator(".msg.user .user-text")).to_have_text("first line\nsecond line")
    expect(box).to_have_value("")


def test_a_long_tool_shows_still_running_and_the_stop_button_cancels(
    context: Any, site: Site
) -> None:
    page = open_new(context, site)
    send(page, '/tool shell {"command": "sleep 60", "timeout": 120}')
    page.get_by_role("button", name="Approve", exact=True).click()
    step = page.locator(".step[data-tool=shell]")
    expect(step.locator(".step-status")).to_have_text("running")
    progress = step.locator(".step-progress")  # a heartbeat after 5 s of silence
    expect(progress).to_have_text(re.compile("still running"), timeout=30_000)
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_text("Stopped: the turn was cancelled.")).to_be_visible()
    expect(step.locator(".step-status")).to_have_text("interrupted")
    expect(progress).to_have_count(0)
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)


def test_a_sub_agent_streams_in_its_own_nested_timeline(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/tool delegate " + json.dumps({"agent": "assistant", "task": "/slow 60"}))
    step = page.locator(".step[data-tool=delegate]")
    nested = step.get_by_role("list", name="delegate: sub-agents")
    expect(nested.locator(".agent-text")).to_contain_text("w5 ")
    # while it streams, none of it is in the chat body
    assert page.locator(".msg .md", has_text="w5 ").count() == 0
    assert page.locator(".msg.streaming", has_text="w5 ").count() == 0
    expect(nested.locator("summary")).to_have_text("assistant")
    expect(step.locator(".step-status")).to_have_text("done", timeout=30_000)
    expect(nested.locator(".agent-text")).to_contain_text("w59")
    expect(page.get_by_text(re.compile("The tool said: w0 w1"))).to_be_visible()


def test_thinking_is_collapsed_and_images_are_shown(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/think the answer is 42")
    reply = page.locator(".msg.assistant", has_text="the answer is 42")
    expect(reply.locator(".md")).to_have_text("the answer is 42")
    thinking = reply.locator("details.thinking")
    expect(thinking.locator("summary")).to_have_text("Thinking")
    expect(thinking.locator(".thinking-text")).to_be_hidden()  # collapsed
    thinking.locator("summary").click()
    expect(thinking.locator(".thinking-text")).to_have_text("Thinking about the answer is 42")

    files = page.locator("input[type=file][multiple]")
    files.set_input_files({"name": "dots.png", "mimeType": "image/png", "buffer": _png(3, 2)})
    send(page, "/say a picture")
    image = page.locator(".msg.user img.attachment-image")
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth") == 3  # drawn
    page.reload()  # a stored row, not only a local preview
    expect(page.locator(".msg.user img.attachment-image")).to_be_visible()


def test_a_first_message_waits_for_the_stream_so_a_quick_failure_is_seen(
    context: Any, site: Site
) -> None:
    # The page sent a new conversation's first message as soon as it made the stream,
    # before the stream was open: a turn that failed at once ended before it connected,
    # and the live error notice (a frame, not a stored row) never reached the page.
    page = context.new_page()

    def slow_stream(route: Any) -> None:
        time.sleep(1.5)  # the stream's request held back, as on a slow network
        route.continue_()

    page.route(re.compile(r"/events\?"), slow_stream)
    page.goto(site.url + "/")
    send(page, "/fail")
    expect(page.get_by_role("alert").filter(has_text="the fake refuses")).to_be_visible()
    expect(page.locator(".stop-failed")).to_contain_text("the fake refuses")
    assert page.locator(".msg.user", has_text="/fail").count() == 1  # sent once


def test_a_first_message_is_sent_even_when_the_stream_cannot_open(context: Any, site: Site) -> None:
    page = context.new_page()
    page.route(re.compile(r"/events\?"), lambda route: route.abort())
    page.goto(site.url + "/")
    send(page, "/say still here")
    cid = conversation_id(page)
    with Client(site.url) as client:  # stored, though the page never had a stream
        deadline = time.monotonic() + 15
        texts: list[str] = []
        while time.monotonic() < deadline and "/say still here" not in texts:
            texts = [message.text for message in client.messages(cid)]
            time.sleep(0.2)
    assert "/say still here" in texts


def test_an_error_and_the_failed_and_budget_stop_reasons(context: Any, site: Site) -> None:
    page = open_new(context, site)
    send(page, "/fail")
    expect(page.get_by_role("alert").filter(has_text="the fake refuses")).to_be_visible()
    expect(page.locator(".stop-failed")).to_contain_text("The turn failed.")
    expect(page.locator(".stop-failed")).to_contain_text("the fake refuses")
    send(page, "/loop")
    expect(page.get_by_text(WRAP_UP)).to_be_visible(timeout=30_000)
    budget = page.get_by_text("Stopped: the turn ran out of its budget of model calls.")
    expect(budget).to_be_visible()
    page.reload()  # the stop reasons are stored with the turns
    expect(page.locator(".stop-failed")).to_contain_text("The turn failed.")
    expect(budget).to_be_visible()


def test_messages_from_the_terminal_and_the_python_client_appear(context: Any, site: Site) -> None:
    cid = site.conversation("Surfaces")
    page = context.new_page()
    page.goto(f"{site.url}/c/{cid}")
    expect(page.get_by_text("Nothing here yet")).to_be_visible()
    terminal = [sys.executable, "-m", "ostinato", "chat", "--url", site.url]
    done = subprocess.run(
        [*terminal, "--conversation", cid],
        input="/say typed in the terminal\n",
        env=site.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    expect(page.locator(".msg.user").first).to_have_text("/say typed in the terminal")
    expect(page.locator(".msg.assistant", has_text="typed in the terminal")).to_be_visible()
    with Client(site.url) as client:
        client.send(cid, "/say sent from Python")
    expect(page.locator(".msg.assistant", has_text="sent from Python")).to_be_visible()
    expect(page.locator(".msg.user")).to_have_count(2)


def test_light_mode_follows_the_system(browser: Any, site: Site) -> None:
    context = browser.new_context(color_scheme="light")
    try:
        page = context.new_page()
        page.goto(site.url + "/")
        send(page, "/say in the light")
        expect(page.locator(".msg.assistant", has_text="in the light")).to_be_visible()
        colours = page.evaluate(
            "[getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.body).color]"
        )
        assert colours == ["rgb(255, 255, 255)", "rgb(29, 31, 35)"]
    finally:
        context.close()


def _count_conversations(site: Site) -> int:
    total, before = 0, None
    while True:
        query = f"?limit=100&before={before}" if before else "?limit=100"
        page = site.api("GET", f"/v1/conversations{query}")
        total += len(page["conversations"])
        before = page["next"]
        if before is None:
            return total
