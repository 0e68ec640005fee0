"""Fixtures for the browser tests: one fake provider and one ``ostinato serve`` per test
module (a server start costs seconds), one Chromium per module, a fresh browser context
(no shared storage) per test. Skipped, with the reason, where Chromium or Playwright is
missing; ``.ci/run`` installs both."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.web.provider import PageChat
from tests.web.site import CHROMIUM, CHROMIUM_ARGS, Site, browser_available

SHOTS_ENV = "OSTINATO_WEB_SHOTS"  # a folder: save the screenshots docs/web.md shows

why_not = browser_available()
pytestmark = pytest.mark.skipif(why_not is not None, reason=why_not or "")


@pytest.fixture(scope="module")
def fake() -> Iterator[PageChat]:
    with PageChat() as chat:
        yield chat


@pytest.fixture(scope="module")
def site(fake: PageChat, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    env = {
        "OSTINATO_MODEL": "openai-chat:fake-model",
        "OPENAI_BASE_URL": f"{fake.url}/v1",
        "OPENAI_API_KEY": "k",
    }
    site = Site(tmp_path_factory.mktemp("site"), env)
    site.start()
    yield site
    site.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if why_not is not None:
        pytest.skip(why_not)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(20_000)
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    yield context
    context.close()
    assert not errors, f"the page raised: {errors}"


def shoot(page: Any, name: str) -> None:
    """Save a screenshot for docs/web.md when OSTINATO_WEB_SHOTS names a folder."""
    folder = os.environ.get(SHOTS_ENV)
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
