"""The chat page with anonymous callers allowed (``allow_anonymous``, mode ``keys``), in
Chromium: it just works without signing in (each browser its own owner, its cookie and
CSRF token handled by the page), and a person can still sign in with a key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.provider import PageChat
from tests.web.site import Site


@pytest.fixture(scope="module")
def site(fake: PageChat, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    env = {
        "OSTINATO_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_API_KEY": "k",
        "OSTINATO_AUTH__MODE": "keys",
        "OSTINATO_AUTH__ALLOW_ANONYMOUS": "true",
        "OSTINATO_AUTH__SECRET": "a-test-secret-that-signs-the-cookies-0123456789",
        # The list is read by the conversation's first words: no title call, whose answer
        # (this fake model echoes its prompt) would rename it once it comes back.
        "OSTINATO_DATA__TITLES": "off",
    }
    site = Site(tmp_path_factory.mktemp("anonymous"), env)
    site.start()
    yield site
    site.stop()


def send(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def test_anonymous_visitors_chat_without_signing_in(browser: Any, site: Site) -> None:
    first = browser.new_context()
    second = browser.new_context()
    try:
        page = first.new_page()
        page.goto(site.url + "/")
        expect(page.get_by_role("heading", name="Sign in")).to_have_count(0)
        send(page, "/say hello stranger")  # POSTs riding the anonymous cookie
        expect(page.locator(".msg.assistant", has_text="hello stranger")).to_be_visible()
        nav = page.get_by_role("navigation", name="Conversations")
        expect(nav.get_by_role("link", name="/say hello stranger", exact=True)).to_be_visible()
        page.reload()
        expect(page.locator(".msg.assistant", has_text="hello stranger")).to_be_visible()

        other = second.new_page()  # another browser: another owner, who sees none of it
        other.goto(site.url + "/")
        other_nav = other.get_by_role("navigation", name="Conversations")
        expect(other_nav.get_by_role("button", name="New conversation")).to_be_visible()
        expect(other_nav.locator("li")).to_have_count(0)
        other.goto(page.url)
        expect(other.get_by_role("heading", name="No such conversation")).to_be_visible()
        expect(other.get_by_text("hello stranger")).to_have_count(0)

        # signing in with a key is still offered, and makes the visitor that key's owner
        _, key = site.new_key("dora")
        other.get_by_role("button", name="Sign in", exact=True).click()
        other.get_by_role("textbox", name="API key").fill(key)
        other.get_by_role("button", name="Sign in", exact=True).click()
        expect(other.get_by_title("Signed in as")).to_have_text("dora")
        other.get_by_role("button", name="Sign out").click()
        other.get_by_role("button", name="Continue without signing in").click()
        expect(other.get_by_role("navigation", name="Conversations")).to_be_visible()
    finally:
        first.close()
        second.close()
