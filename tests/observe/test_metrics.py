"""Prometheus metrics (observe.prometheus): a turn with a router call, compaction, a
sub-agent and extraction, counted and read back through /metrics with prometheus-client's
own parser; the metrics token; several processes summed with PROMETHEUS_MULTIPROC_DIR;
histograms written once per turn read as written once per value."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # makes `tests` importable

from ostinato import observe
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.observe.prometheus import PrometheusBackend
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.routes.metrics import MetricsEndpoint
from ostinato.store import SQLiteStore
from ostinato.store.memory import MemoryStore
from tests.observe.scenario import run_scenario
from tests.server.sse_client import open_stream

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture
def backend() -> Iterator[PrometheusBackend]:
    metrics = PrometheusBackend(CollectorRegistry())
    previous = observe.install(metrics)
    try:
        yield metrics
    finally:
        observe.install(previous)


def endpoint(metrics: PrometheusBackend, token: str | None = None) -> MetricsEndpoint:
    return MetricsEndpoint(metrics.exposition, metrics.content_type, token)


async def test_a_turn_is_counted_in_every_metric(backend: PrometheusBackend) -> None:
    ran = await run_scenario()
    app = create_app(ran.runtime)
    app.state.metrics = endpoint(backend)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        response = await c.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/")
    got = samples(response.text)
    # three turns of the lead, plus the helper's sub-agent turn
    assert got[("ostinato_turns_total", (("stop_reason", "end_turn"),))] == 4
    assert got[("ostinato_turn_duration_seconds_count", ())] == 4
    assert got[("ostinato_step_duration_seconds_count", ())] >= 5
    calls = {
        dict(labels)["model"]: value
        for (name, labels), value in got.items()
        if name == "ostinato_model_call_duration_seconds_count"
    }
    assert calls == {
        "test:router": 3,
        "test:lead": 4,
        "test:sum": 1,
        "test:helper": 1,
        "test:extract": 3,
    }
    assert got[("ostinato_model_time_to_first_token_seconds_count", (("model", "test:lead"),))] == 4
    lead_in = ("ostinato_model_tokens_total", (("kind", "input"), ("model", "test:lead")))
    assert got[lead_in] == 1 + 1 + 100 + 120
    assert got[("ostinato_model_tokens_total", (("kind", "output"), ("model", "test:sum")))] == 5
    assert got[("ostinato_tool_calls_total", (("status", "ok"), ("tool", "delegate")))] == 1
    assert got[("ostinato_active_turns", ())] == 0  # all ended
    assert got[("ostinato_queued_messages", ())] == 0


async def test_retries_approvals_queue_and_streams_have_their_metrics(
    backend: PrometheusBackend,
) -> None:
    call = observe.model_call("a:b", None, "step")  # type: ignore[arg-type]
    with call:
        call.retried("rate_limited: slow down")
        call.retried("overloaded: later")
    with observe.approval("shell") as wait:
        wait.ending("denied")
    observe.queued(2)
    observe.queued(-1)
    observe.streams(1)
    observe.store_write(0.002)
    got = samples(backend.exposition().decode())
    assert got[("ostinato_model_retries_total", (("cause", "rate_limited"),))] == 1
    assert got[("ostinato_model_retries_total", (("cause", "overloaded"),))] == 1
    assert got[("ostinato_approvals_total", (("ending", "denied"),))] == 1
    assert got[("ostinato_queued_messages", ())] == 1
    assert got[("ostinato_open_streams", ())] == 1
    assert got[("ostinato_store_commit_seconds_count", ())] == 1


async def test_the_metrics_token_guards_metrics_and_off_is_a_404(
    backend: PrometheusBackend,
) -> None:
    runtime = Runtime(MemoryStore(), model=ScriptedModel())
    ran_app = create_app(runtime, auth=AuthSettings(mode="keys"))  # the token, not a key
    ran_app.state.metrics = endpoint(backend, token="scrape-me")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(ran_app), base_url="http://t") as c:
        assert (await c.get("/metrics")).status_code == 401
        wrong = await c.get("/metrics", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
        right = await c.get("/metrics", headers={"authorization": "Bearer scrape-me"})
        assert right.status_code == 200 and "ostinato_turns_total" in right.text
        assert "/metrics" not in (await c.get("/openapi.json")).text
        assert (await c.get("/v1/conversations")).status_code == 401  # keys mode is on
    off = create_app(runtime)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(off), base_url="http://t") as c:
        missing = await c.get("/metrics")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


WORKER = """
import sys
from ostinato import observe
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.observe.prometheus import PrometheusBackend
backend = PrometheusBackend()
observe.install(backend)
observe.queued(int(sys.argv[1]))
backend.m.turns.labels("end_turn").inc()
"""


def test_several_processes_are_summed_with_a_multiprocess_dir(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for n in (2, 3):
        subprocess.run([sys.executable, "-c", WORKER, str(n)], env=env, check=True)
    reader = "from ostinato.observe.prometheus import PrometheusBackend; import sys; " + (
        "sys.stdout.write(PrometheusBackend().exposition().decode())"
    )
    out = subprocess.run(
        [sys.executable, "-c", reader], env=env, check=True, capture_output=True, text=True
    ).stdout
    got = samples(out)
    assert got[("ostinato_turns_total", (("stop_reason", "end_turn"),))] == 2


async def test_store_commits_and_open_streams_are_measured(
    backend: PrometheusBackend, tmp_path: Path
) -> None:
    store = await SQLiteStore.open(tmp_path / "db.sqlite")
    runtime = Runtime(store, model=ScriptedModel([text_step("Hi.")]))
    app = create_app(runtime)
    cid = (await runtime.create_conversation()).id
    await runtime.run_turn(cid, "hello")
    got = samples(backend.exposition().decode())
    assert got[("ostinato_store_commit_seconds_count", ())] >= 2  # the message, the turn's end
    async with open_stream(app, "GET", f"/v1/conversations/{cid}/events") as stream:
        await stream.next_frame()
        assert samples(backend.exposition().decode())[("ostinato_open_streams", ())] == 1
    await app.state.ostinato.aclose()
    await runtime.close()
    assert samples(backend.exposition().decode())[("ostinato_open_streams", ())] == 0


OBSERVED = """
import sys
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from ostinato.observe.prometheus import SECONDS, PrometheusBackend, observe_all
registry = CollectorRegistry()
plain = Histogram("t_seconds", "t", buckets=SECONDS, registry=registry)
child = Histogram("u_seconds", "u", ["model"], buckets=SECONDS, registry=registry).labels("m")
values = [0.0, 0.001, 0.005, 0.0051, 0.01, 0.3, 2.5, 7.0, 299.0, 300.0, 1e6, 0.005]
for histogram in (plain, child):
    if sys.argv[1] == "all":
        observe_all(histogram, values)
        observe_all(histogram, [])
    else:
        for value in values:
            histogram.observe(value)
text = PrometheusBackend().exposition() if len(sys.argv) > 2 else generate_latest(registry)
sys.stdout.write(text.decode())
"""


@pytest.mark.parametrize("multiprocess", [False, True])
def test_observing_all_at_once_is_observing_each(tmp_path: Path, multiprocess: bool) -> None:
    """observe_all (a turn's steps and calls at its end) writes what one observe per
    value would, bucket by bucket, bounds included, in one process and summed from a
    PROMETHEUS_MULTIPROC_DIR."""
    got = {}
    for way in ("all", "each"):
        env = dict(os.environ)
        args = [sys.executable, "-c", OBSERVED, way]
        if multiprocess:
            env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / way)
            (tmp_path / way).mkdir()
            args.append("multi")
        out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
        got[way] = {k: v for k, v in samples(out).items() if not k[0].endswith("_created")}
    assert got["all"] == got["each"]
    assert got["all"][("t_seconds_bucket", (("le", "0.005"),))] == 4  # 0.005 is in its bound
    assert got["all"][("u_seconds_count", (("model", "m"),))] == 12
