"""``/metrics`` is not open and not unbounded (issue 25, item 10): before, with metrics on
and no token any caller read it in every mode, and it named other owners' private tools;
its ``tool`` and ``model`` labels took whatever a caller or model named, so a loop of
random names grew memory and every scrape without limit."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ostinato import observe
from ostinato.config import ConfigError, load_config
from ostinato.identity.settings import AuthSettings
from ostinato.models.scripted import ScriptedModel
from ostinato.observe.prometheus import PrometheusBackend
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.server.routes.metrics import MetricsEndpoint
from ostinato.store.memory import MemoryStore
from tests.observe.scenario import run_scenario


@pytest.fixture
def backend() -> Iterator[PrometheusBackend]:
    metrics = PrometheusBackend(CollectorRegistry())
    previous = observe.install(metrics)
    try:
        yield metrics
    finally:
        observe.install(previous)


def _labels(backend: PrometheusBackend, metric: str, label: str) -> set[str]:
    return {
        s.labels[label]
        for family in text_string_to_metric_families(backend.exposition().decode())
        for s in family.samples
        if s.name.startswith(metric) and label in s.labels
    }


async def test_labels_name_only_the_deployments_tools_and_models(
    backend: PrometheusBackend,
) -> None:
    """The scenario's turns call five models and the ``delegate`` tool; the deployment
    configured one of those models and no tool of that name but ``delegate``."""
    backend.bound(tools={"delegate"}.__contains__, models={"test:lead"}.__contains__)
    await run_scenario()
    assert _labels(backend, "ostinato_tool_calls", "tool") == {"delegate"}
    assert _labels(backend, "ostinato_model_call_duration", "model") == {"test:lead", "other"}
    backend.bound(tools=set().__contains__, models=set().__contains__)
    await run_scenario()
    assert _labels(backend, "ostinato_tool_calls", "tool") == {"delegate", "other"}


def test_metrics_without_a_token_refuse_to_start_outside_mode_none() -> None:
    env = {"OSTINATO_OBSERVABILITY__METRICS": "true", "OSTINATO_AUTH__MODE": "keys"}
    with pytest.raises(ConfigError) as refused:
        load_config(None, env=env)
    assert any("metrics_token" in p for p in refused.value.problems)
    load_config(None, env={**env, "OSTINATO_OBSERVABILITY__METRICS_TOKEN": "t"})
    load_config(None, env={"OSTINATO_OBSERVABILITY__METRICS": "true"})  # mode none


async def test_the_route_refuses_without_a_token_outside_mode_none(
    backend: PrometheusBackend,
) -> None:
    app = create_app(Runtime(MemoryStore(), model=ScriptedModel()), auth=AuthSettings(mode="keys"))
    app.state.metrics = MetricsEndpoint(backend.exposition, backend.content_type, None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as c:
        assert (await c.get("/metrics")).status_code == 401


def test_serve_names_the_static_tools_and_the_configured_models() -> None:
    from ostinato.cli.serve import metric_labels
    from ostinato.tools.builtins import builtin_tools
    from ostinato.tools.forge import Sandbox
    from ostinato.tools.forge.tools import forged_source
    from ostinato.tools.mounting import Mount, Source

    store = MemoryStore()
    mount = Mount(
        [Source("builtins", builtin_tools(), builtin=True), forged_source(store, Sandbox())]
    )

    def models(name: str) -> ScriptedModel:
        if name == "forte":
            raise ValueError("no key for forte's provider")
        model = ScriptedModel()
        model.name = f"made:{name}"
        return model

    runtime = Runtime(store, model=ScriptedModel(), mount=mount, models=models)
    config, _ = load_config(None, env={"OSTINATO_MODELS__TIERS": '{"allegro": "openai:big"}'})
    tools, named = metric_labels(config, runtime, "x:default")
    assert {"clock", "calculator", "read_attachment"} <= tools
    assert not any(t.startswith("my_") for t in tools)  # a person's own: never named
    assert {"made:x:default", "made:minuet", "made:allegro", "made:openai:big"} <= named
    assert "made:forte" not in named
