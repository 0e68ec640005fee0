"""A server run with timelines off (``OSTINATO_OBSERVABILITY__TIMELINE=false``): a turn's
record has its metrics and no steps, and the page's timeline view says why there is none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.site import Site
from tests.web.test_chat import conversation_id, send


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    site = Site(tmp_path_factory.mktemp("untimed"), {"OSTINATO_OBSERVABILITY__TIMELINE": "false"})
    site.start()
    yield site
    site.stop()


def test_a_turn_run_with_timelines_off_says_it_has_none(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, '/tool calculator {"expression": "6*7"}')
    reply = page.locator(".msg.assistant", has_text="The tool returned: 6*7 = 42")
    expect(reply).to_be_visible()
    cid = conversation_id(page)
    [turn] = site.api("GET", f"/v1/conversations/{cid}/turns")["turns"]
    stored = site.api("GET", f"/v1/conversations/{cid}/turns/{turn['id']}")
    assert stored["steps"] is None and stored["status"] == "finished"
    metrics = stored["metrics"]  # counted as ever: both steps' calls, the tool call
    assert metrics["model_calls_by_purpose"]["step"] == 2, str(metrics)
    assert metrics["tools"]["calculator"] == 1
    reply.get_by_role("button", name="Timeline").click()
    expect(reply.get_by_text("ran while timelines were off")).to_be_visible()
