"""A live configuration (``ostinato.reload``): the file read again, checked first and
refused whole on a mistake (the old one keeps running), a good change applied to new
turns; settings that need a restart are refused by name; ``POST /v1/admin/reload``."""

from __future__ import annotations

from pathlib import Path

import httpx

from ostinato.config import load_config
from ostinato.deployment import Deployment, build_runtime
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.reload import Reloader, changes
from ostinato.server import create_app
from ostinato.spend.rule import Limit
from ostinato.store.memory import MemoryStore

FILE = """
[memory]
extract_facts = false

[data]
titles = "off"

[[agents]]
id = "assistant"
prompt = "{prompt}"
tools = []

[budgets.default]
hard = {hard}
"""


def write(path: Path, prompt: str = "You are terse.", hard: float = 5.0, extra: str = "") -> None:
    path.write_text(FILE.format(prompt=prompt, hard=hard) + extra)


async def deployed(path: Path) -> tuple[Deployment, Reloader, ScriptedModel]:
    config, _ = load_config(path, env={})
    model = ScriptedModel(name="scripted:model")
    deployment = await build_runtime(
        config, MemoryStore(), default_model=model, default_id="scripted:model",
        data_dir=path.parent / "data", env={},
    )  # fmt: skip
    return deployment, Reloader(deployment, config, path, env={}), model


async def turn(deployment: Deployment, model: ScriptedModel, text: str = "hi") -> str:
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    model.add(text_step("ok"))
    await runtime.run_turn(cid, text)
    return model.requests[-1].system


async def test_a_good_change_applies_to_the_next_turn(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    write(path)
    deployment, reloader, model = await deployed(path)
    assert "You are terse." in await turn(deployment, model)
    write(path, prompt="You are cheerful.", hard=7.5)
    outcome = await reloader.reload()
    assert outcome.applied and outcome.problems == []
    assert outcome.changed == ["agents", "budgets.default"]
    assert "You are cheerful." in await turn(deployment, model)
    gate = deployment.runtime.spend
    assert gate is not None and gate.budgets.default == Limit(None, 7.5, "day")
    await deployment.runtime.close()


async def test_a_reload_keeps_the_tabs_parked_unless_the_budgets_change(tmp_path: Path) -> None:
    """A turn's tab waits for the owner's next turn (``spend.parking``): a reload that
    changes other settings leaves it; one that changes the budgets closes it."""
    path = tmp_path / "ostinato.toml"
    write(path)
    deployment, reloader, model = await deployed(path)
    await turn(deployment, model)
    gate = deployment.runtime.spend
    assert gate is not None and len(gate.parking) == 1
    write(path, prompt="You are cheerful.")
    assert (await reloader.reload()).changed == ["agents"]
    assert len(gate.parking) == 1
    write(path, prompt="You are cheerful.", hard=7.5)
    assert (await reloader.reload()).changed == ["budgets.default"]
    assert len(gate.parking) == 0
    await deployment.runtime.close()


async def test_a_broken_file_changes_nothing_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    write(path)
    deployment, reloader, model = await deployed(path)
    write(path, prompt="You are cheerful.", hard=-1)
    outcome = await reloader.reload()
    assert not outcome.applied
    assert outcome.problems == ["budgets.default.hard: Input should be greater than or equal to 0"]
    assert "You are terse." in await turn(deployment, model)  # the old one runs on
    path.write_text("[[agents]\nid = ")  # not even TOML
    outcome = await reloader.reload()
    assert not outcome.applied and outcome.problems[0].startswith("not valid TOML")
    gate = deployment.runtime.spend
    assert gate is not None and gate.budgets.default == Limit(None, 5.0, "day")
    await deployment.runtime.close()


async def test_a_setting_that_needs_a_restart_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    write(path)
    deployment, reloader, model = await deployed(path)
    write(path, prompt="You are cheerful.", extra="\n[server]\nport = 9123\n")
    outcome = await reloader.reload()
    assert outcome.problems == ["server.port: changing it needs a restart"]
    assert "You are terse." in await turn(deployment, model)  # refused whole
    await deployment.runtime.close()


def test_which_settings_are_live() -> None:
    from ostinato.config import Config

    before = Config()
    after = Config.model_validate(
        {"models": {"tiers": {"forte": "openai:gpt-5"}}, "server": {"max_turns": 3}}
    )
    assert changes(before, after) == (["models.tiers"], ["server.max_turns"])


async def test_the_admin_route_reloads(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    write(path)
    deployment, reloader, model = await deployed(path)
    app = create_app(deployment.runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        assert (await client.post("/v1/admin/reload")).status_code == 409  # no reloader yet
        app.state.reloader = reloader
        write(path, prompt="You are cheerful.")
        answer = await client.post("/v1/admin/reload")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"source": str(path), "changed": ["agents"], "servers": "this"}
        write(path, hard=-2)
        refused = await client.post("/v1/admin/reload")
        assert refused.status_code == 422
        assert "budgets.default.hard" in refused.json()["error"]["message"]
    assert "You are cheerful." in await turn(deployment, model)
    await app.state.ostinato.aclose()
    await deployment.runtime.close()
