"""Building the served runtime from a config file, and `ostinato check-config`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ostinato.cli.main import main
from ostinato.config import ConfigError, load_config
from ostinato.deployment import build_runtime
from ostinato.models.offline import OfflineModel
from ostinato.store.memory import MemoryStore
from ostinato.titles import AfterTurns, Titler

PETSTORE = {
    "openapi": "3.1.0",
    "info": {"title": "pets", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9/api"}],
    "paths": {
        "/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}
    },
}


def config_file(tmp_path: Path, extra: str = "") -> Path:
    spec = tmp_path / "pets.json"
    spec.write_text(json.dumps(PETSTORE))
    path = tmp_path / "ostinato.toml"
    path.write_text(
        f"""
[guidelines]
rules = ["Be brief."]

[[agents]]
id = "helper"
persona = "Ada"
description = "general help"
prompt = "You help."
tier = "minuet"
default = true

[[agents]]
id = "coder"
tools = ["shell", "read_file"]
ask_for = ["exec"]
max_model_calls = 25

[[tools.openapi]]
name = "pets"
url = "{spec}"
{extra}
"""
    )
    return path


async def test_the_runtime_is_built_from_the_file(tmp_path: Path) -> None:
    config, _ = load_config(config_file(tmp_path), env={})
    deployment = await build_runtime(
        config,
        MemoryStore(),
        default_model=OfflineModel(),
        default_id="offline:ostinato",
        data_dir=tmp_path / "data",
    )
    runtime = deployment.runtime
    helper, coder = runtime.router.skills
    assert runtime.router.default is helper and runtime.router.classifier is not None
    assert helper.agent.system_prompt.endswith("- Be brief.") and helper.tier == "minuet"
    assert coder.agent.max_model_calls == 25 and coder.agent.tools == ("shell", "read_file")
    assert coder.approvals is not None and coder.approvals.ask_for == {"exec"}
    names = {t.name for t in (await runtime.mount.registry()).registry}
    assert {"clock", "shell", "http_fetch", "remember", "recall", "delegate"} <= names
    assert "pets_listPets" in names
    assert not deployment.facts  # fact extraction is off by default on a local model
    assert isinstance(runtime.after_turn, AfterTurns)
    assert [type(w) for w in runtime.after_turn.works] == [Titler]  # titles only
    await deployment.aclose()


async def test_a_missing_secret_is_a_configuration_error(tmp_path: Path) -> None:
    extra = 'auth = { type = "bearer", token_env = "PETS_TOKEN_NOT_SET" }'
    config, _ = load_config(config_file(tmp_path, extra), env={})
    with pytest.raises(ConfigError, match="PETS_TOKEN_NOT_SET is not set"):
        await build_runtime(
            config,
            MemoryStore(),
            default_model=OfflineModel(),
            default_id="offline:ostinato",
            data_dir=tmp_path,
            env={},
        )


def test_check_config_says_ok_or_where_it_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-config", str(config_file(tmp_path))]) == 0
    assert "OK" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text("[[agents]]\nid = 'x'\ntier = 'turbo'\n[server]\nprot = 1\n")
    assert main(["check-config", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "2 problem(s)" in out  # a schema error does not hide the others
    assert "server.prot: unknown setting" in out
    assert "agents[0].tier: unknown tier 'turbo'" in out


def test_check_config_takes_the_file_as_serve_does_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nprot = 1\n")
    assert main(["check-config", "--config", str(bad)]) == 1  # not the defaults: the file
    assert "server.prot: unknown setting" in capsys.readouterr().out
    assert main(["check-config", "--config", str(config_file(tmp_path))]) == 0
    assert main(["check-config", str(bad), "--config", str(config_file(tmp_path))]) == 2
