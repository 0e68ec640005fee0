"""The page and spend budgets (issue 29): the top bar shows today's spend against the
owner's limit, and a soft limit asks with a card that comes back after a reload and,
answered, lets the turn go on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from ostinato.spend.words import money
from tests.web.site import Site
from tests.web.test_chat import conversation_id, send

PRICES = {"offline:ostinato": {"input": 10.0, "output": 10.0}}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    env = {
        "OSTINATO_OBSERVABILITY__PRICES": json.dumps(PRICES),
        "OSTINATO_BUDGETS__DEFAULT": json.dumps({"soft": 0.000001, "hard": 100}),
        "OSTINATO_BUDGETS__OUTPUT_TOKENS": "50",
        "OSTINATO_DATA__TITLES": "off",
    }
    site = Site(tmp_path_factory.mktemp("spend"), env)
    site.start()
    yield site
    site.stop()


def test_stopping_at_the_card_ends_the_turn_with_a_sentence(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, "one more")
    card = page.get_by_role("region", name="Spending limit")
    card.get_by_role("button", name="Stop here").click()
    expect(page.get_by_text("so as not to go past today's soft limit")).to_be_visible()
    expect(card).to_have_count(0)


def test_the_soft_limit_card_survives_a_reload_and_continuing_goes_on(
    context: Any, site: Site
) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    expect(page.get_by_label("Spend today")).to_have_text("Today $0.00 of $100.00")
    send(page, "hello there")
    card = page.get_by_role("region", name="Spending limit")
    expect(card).to_contain_text("This will take you past $0.0000 of today's $100.00")
    cid = conversation_id(page)
    page.reload()  # the card is a pending approval: it comes back
    card = page.get_by_role("region", name="Spending limit")
    expect(card).to_be_visible()
    card.get_by_role("button", name="Continue").click()
    expect(page.locator(".msg.assistant", has_text="offline model")).to_have_count(1)
    expect(card).to_have_count(0)
    # The answer's row is on screen as soon as it is stored; the turn is finished in the
    # write after it, which a loaded machine may not have made yet.
    for _ in range(300):
        [turn] = site.api("GET", f"/v1/conversations/{cid}/turns")["turns"]
        if turn["stop_reason"] is not None:
            break
        time.sleep(0.1)
    assert turn["stop_reason"] == "end_turn"
    usage = site.api("GET", "/v1/usage")
    assert usage["total"]["calls"] == 1 and usage["total"]["cost_usd"] > 0  # one call made
    page.reload()  # the top bar reads today's spend again
    spent = money(usage["budgets"][0]["spent_usd"])
    expect(page.get_by_label("Spend today")).to_have_text(f"Today {spent} of $100.00")
    # agreed for the rest of the day: the next message is not asked about
    send(page, "and again")
    expect(page.locator(".msg.assistant", has_text="offline model")).to_have_count(2)
    expect(page.get_by_role("region", name="Spending limit")).to_have_count(0)
