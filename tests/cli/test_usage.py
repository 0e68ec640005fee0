"""``ostinato usage``: the caller's usage by day, model and agent with their budget, and
an admin's view of every owner, read from a server; an unknown cost says so."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from ostinato.cli.main import build_parser
from ostinato.cli.usage import run
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.observe import prices
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.spend.gate import SpendGate
from ostinato.spend.limits import Budgets
from ostinato.spend.rule import Limit
from ostinato.store.memory import MemoryStore


@pytest.fixture(autouse=True)
def priced() -> Iterator[None]:
    prices.configure({"scripted:priced": prices.Price(input=10.0, output=10.0)})
    yield
    prices.configure({})


def args(*given: str) -> argparse.Namespace:
    return build_parser().parse_args(["usage", "--url", "http://test", *given])


async def served() -> tuple[Runtime, TestClient]:
    store = MemoryStore()
    runtime = Runtime(store, model=ScriptedModel([], name="scripted:priced"))
    runtime.spend = SpendGate(store, Budgets(default=Limit(soft=4.0, hard=5.0)))
    for model, text in (("scripted:priced", "one"), ("scripted:free", "two")):
        cid = (await runtime.create_conversation(owner="local")).id
        await runtime.run_turn(cid, "hi", model=ScriptedModel([text_step(text)], name=model))
    return runtime, TestClient(create_app(runtime), base_url="http://test")


async def test_usage_prints_days_models_agents_and_the_budget() -> None:
    runtime, client = await served()
    out = io.StringIO()
    assert run(args(), out, client) == 0
    text = out.getvalue()
    assert "usage of local" in text and "(USD)" in text
    assert "scripted:priced" in text and "scripted:free" in text
    assert "unknown (1 unpriced;" in text  # never a zero for the unpriced model
    assert "budget: $0.00" in text and "(soft $4.00, hard $5.00)" in text
    await runtime.close()


async def test_usage_all_is_the_admin_view_and_json_is_the_answer() -> None:
    runtime, client = await served()
    out = io.StringIO()
    assert run(args("--all"), out, client) == 0
    assert "usage of every owner" in out.getvalue() and "local" in out.getvalue()
    raw = io.StringIO()
    assert run(args("--json", "--since", "2020-01-01", "--until", "2020-01-02"), raw, client) == 0
    assert '"calls": 0' in raw.getvalue()
    await runtime.close()


async def test_a_refused_request_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    runtime, client = await served()
    assert run(args("--since", "2026-12-05", "--until", "2026-12-01"), io.StringIO(), client) == 1
    assert "422" in capsys.readouterr().err
    await runtime.close()
