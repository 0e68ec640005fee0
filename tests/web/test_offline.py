"""The chat page on the model the README's first command serves (no provider configured:
the offline model, which calls a tool for ``/tool NAME {json}`` and summarises its
result): issue 12's "done when" walk-through as written, issue 18's (a tool made from the
page, its code approved there, called in the next message), and a turn's timeline."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import shoot
from tests.web.site import Site
from tests.web.test_chat import SHELL, conversation_id, send

C_TO_F = "(args) => ({fahrenheit: args.celsius * 9 / 5 + 32})"
CREATE = {
    "name": "celsius_to_fahrenheit",
    "description": "Convert a temperature from Celsius to Fahrenheit.",
    "parameters": {
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
    },
    "code": C_TO_F,
    "example": {"celsius": 100},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    site = Site(tmp_path_factory.mktemp("offline"), {})  # no provider: the offline model
    site.start()
    yield site
    site.stop()


def test_the_walk_through_on_the_offline_model(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, SHELL)
    approve = page.get_by_role("button", name="Approve", exact=True)
    expect(page.get_by_role("region", name="Approval needed: shell")).to_be_focused()
    approve.click()
    step = page.locator(".step[data-tool=shell]")
    expect(step.locator(".step-status")).to_have_text("done")
    step.locator("summary").click()
    expect(step.locator(".step-result")).to_contain_text("exit_code")
    reply = page.locator(".msg.assistant", has_text="The tool returned:")
    expect(reply).to_contain_text("exit_code")  # the offline model's summary of the result
    cid = conversation_id(page)
    assert site.api("GET", f"/v1/conversations/{cid}")["state"] == "idle"

    send(page, SHELL)  # a second such card, then a reload in its middle
    expect(approve).to_be_visible()
    page.reload()
    expect(approve).to_be_visible()
    expect(page.locator(".msg.user")).to_have_count(2)

    other = context.new_page()  # a second tab sees the conversation move
    other.goto(page.url)
    expect(other.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    approve.click()
    expect(other.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(other.locator(".step[data-tool=shell] .step-status")).to_have_text(["done", "done"])
    send(page, '/tool calculator {"expression": "6*7"}')
    expect(other.get_by_text("The tool returned: 6*7 = 42")).to_be_visible()
    expect(other.locator(".msg.user")).to_have_count(3)
    expect(page.locator(".msg.user")).to_have_count(3)


def test_a_tool_made_on_the_page_is_called_in_the_next_message(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, "/tool create_tool " + json.dumps(CREATE))
    card = page.get_by_role("region", name="Approval needed: create_tool")
    expect(card).to_be_focused()
    expect(card.locator(".risk")).to_have_text("exec")
    args = json.loads(card.locator(".card-args").inner_text())
    assert args["code"] == C_TO_F  # the person approves the code that will be stored
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".step[data-tool=create_tool] .step-status")).to_have_text("done")
    made = re.compile(r"The tool returned: .*my_celsius_to_fahrenheit")
    expect(page.get_by_text(made)).to_be_visible()

    send(page, '/tool my_celsius_to_fahrenheit {"celsius": 100}')
    step = page.locator(".step[data-tool=my_celsius_to_fahrenheit]")
    expect(step.locator(".step-status")).to_have_text("done")
    expect(page.get_by_text('The tool returned: {"fahrenheit": 212}')).to_be_visible()
    assert site.api("GET", "/v1/tools/forged")["tools"][0]["code"] == C_TO_F


def test_a_turn_s_timeline_on_demand(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(site.url + "/")
    send(page, '/tool calculator {"expression": "2*(3+4)"}')
    reply = page.locator(".msg.assistant", has_text="The tool returned: 2*(3+4) = 14")
    expect(reply).to_be_visible()
    timeline = reply.get_by_role("region", name="Turn timeline")
    expect(timeline).to_have_count(0)  # not read until asked for
    reply.get_by_role("button", name="Timeline").click()
    expect(timeline).to_contain_text("end_turn in")
    cid = conversation_id(page)
    turn_id = site.api("GET", f"/v1/conversations/{cid}/turns")["turns"][-1]["id"]
    stored = site.api("GET", f"/v1/conversations/{cid}/turns/{turn_id}")["steps"]
    steps = timeline.locator(".tt-step")
    expect(steps).to_have_count(len(stored))  # every step, each with its calls
    for step, record in zip(steps.all(), stored, strict=True):
        assert step.get_attribute("data-step") == str(record["index"])
        expect(step.locator(".tt-model")).to_have_count(len(record["model_calls"]))
        expect(step.locator(".tt-tool")).to_have_count(len(record["tool_calls"]))
    (calling,) = [r for r in stored if [c["name"] for c in r["tool_calls"]] == ["calculator"]]
    first = timeline.locator(f'.tt-step[data-step="{calling["index"]}"]')
    model = first.locator(".tt-model")
    expect(model).to_contain_text("step")
    expect(model).to_contain_text("offline:ostinato")
    tool = first.locator(".tt-tool[data-tool=calculator]")
    expect(tool).to_contain_text("ok")
    expect(tool.locator(".tt-at")).to_have_text(re.compile(r"^\+\d+(\.\d+)? m?s$"))
    expect(tool.locator(".tt-dur")).to_have_text(re.compile(r"^\d+(\.\d+)? m?s$"))
    width = tool.locator(".tt-bar").evaluate("el => el.getBoundingClientRect().width")
    assert width > 0  # drawn on the turn's time line
    shoot(page, "turn-timeline")
    reply.get_by_role("button", name="Timeline").click()
    expect(timeline).to_have_count(0)
