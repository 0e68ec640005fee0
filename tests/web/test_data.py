"""The page's side of the data people keep: the sidebar searches as the person types and
a hit opens its conversation at the row; conversations are archived, restored, exported,
and imported from a file the person picks (a broken one shows the server's message)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import expect

from ostinato.ids import new_id
from ostinato.messages import Message, TextBlock
from ostinato.store import open_store
from ostinato.store.base import AppendMessage, Conversation, CreateConversation, utcnow
from tests.web.site import Site

NEEDLE_AT = 12  # the seq of the row the search finds: far above the newest rows


def _write(db_url: str) -> str:
    async def write() -> str:
        store = await open_store(db_url)
        try:
            now = utcnow()
            conversation = Conversation(new_id(), "idle", now, now, "local", title="Airships")
            rows = []
            for seq in range(1, 401):
                text = f"row {seq}: nothing to see here"
                if seq == NEEDLE_AT:
                    text = "The zeppelin landed at dawn, quietly."
                role = "user" if seq % 2 else "assistant"
                rows.append(AppendMessage(conversation.id, Message(role, (TextBlock(text),))))
            await store.write(CreateConversation(conversation), *rows)
            return conversation.id
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps a loop on this thread
        return pool.submit(asyncio.run, write()).result()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, str]]:
    site = Site(tmp_path_factory.mktemp("data"), {})
    cid = _write(site.db)
    site.start()
    yield site, cid
    site.stop()


def test_the_sidebar_searches_as_the_person_types(context: Any, filled: tuple[Site, str]) -> None:
    site, cid = filled
    page = context.new_page()
    page.goto(site.url + "/")
    box = page.get_by_role("searchbox", name="Search conversations")
    box.press_sequentially("zepp", delay=40)  # no Enter: each key searches again
    results = page.get_by_role("list", name="Search results")
    hit = results.get_by_role("link").filter(has_text="landed at dawn")
    expect(hit).to_have_count(1)
    expect(hit.locator("mark")).to_have_text("zeppelin")
    expect(hit).to_contain_text("Airships")
    hit.click()
    expect(page).to_have_url(f"{site.url}/c/{cid}#seq-{NEEDLE_AT}")
    row = page.locator(f'[data-seq="{NEEDLE_AT}"]')
    expect(row).to_have_class("msg assistant found" if NEEDLE_AT % 2 == 0 else "msg user found")
    expect(row).to_be_in_viewport()
    box.fill("no such word anywhere")
    expect(page.get_by_role("status")).to_contain_text("Nothing matches")
    box.press("Escape")
    expect(page.get_by_role("list", name="Search results")).to_have_count(0)
    expect(page.locator(".conversation-list")).to_contain_text("Airships")


def test_a_conversation_is_archived_and_restored(context: Any, filled: tuple[Site, str]) -> None:
    site, _ = filled
    cid = site.conversation("Old plans")
    page = context.new_page()
    page.goto(site.url + "/")
    listing = page.locator(".conversation-list")
    expect(listing).to_contain_text("Old plans")
    page.get_by_role("button", name="Archive Old plans").click()
    expect(listing).not_to_contain_text("Old plans")
    assert site.api("GET", f"/v1/conversations/{cid}")["archived_at"]
    page.get_by_role("button", name="Archived conversations").click()
    expect(page.get_by_role("heading", name="Archived")).to_be_visible()
    expect(listing).to_contain_text("Old plans")
    page.get_by_role("button", name="Restore Old plans").click()
    expect(listing).not_to_contain_text("Old plans")
    page.get_by_role("button", name="Back to conversations").click()
    expect(listing).to_contain_text("Old plans")
    assert site.api("GET", f"/v1/conversations/{cid}")["archived_at"] is None


def test_a_conversation_is_exported_from_the_list(context: Any, filled: tuple[Site, str]) -> None:
    site, cid = filled
    page = context.new_page()
    page.goto(site.url + "/")
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Export Airships").click()
    download = downloading.value
    assert download.suggested_filename == f"conversation-{cid}.json"
    with open(download.path(), encoding="utf-8") as file:
        document = json.load(file)
    (exported,) = document["conversations"]
    assert exported["title"] == "Airships" and len(exported["messages"]) == 400


def test_an_exported_file_is_imported_from_the_sidebar(
    context: Any, filled: tuple[Site, str], tmp_path: Any
) -> None:
    site, _ = filled
    site.conversation("Okapi notes")
    page = context.new_page()
    page.goto(site.url + "/")
    listing = page.locator(".conversation-list")
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Export Okapi notes").click()
    exported = tmp_path / "okapi.json"
    downloading.value.save_as(exported)
    document = json.loads(exported.read_text(encoding="utf-8"))
    picker = page.get_by_label("Import conversations")
    page.get_by_role("button", name="Archived conversations").focus()
    page.keyboard.press("Tab")  # the picker is next in the keyboard's order
    expect(picker).to_be_focused()
    picker.set_input_files(exported)
    expect(page.get_by_role("status")).to_have_text("Imported 1 conversation.")
    expect(listing.get_by_text("Okapi notes")).to_have_count(2)
    titles = [c["title"] for c in site.api("GET", "/v1/conversations?limit=100")["conversations"]]
    assert titles.count("Okapi notes") == 2
    document["conversations"][0]["branch_tip"] = 99
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    picker.set_input_files(broken)
    expect(page.get_by_role("alert")).to_contain_text("conversations[0].branch_tip: no message 99")
    expect(page.get_by_role("status")).to_have_count(0)
    again = site.api("GET", "/v1/conversations?limit=100")["conversations"]
    assert [c["title"] for c in again].count("Okapi notes") == 2
    expect(listing.get_by_text("Okapi notes")).to_have_count(2)
