"""The settings' layers (flag > environment > short name > file > default), their
validation, and the generated table in docs/configuration.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from ostinato.config import Config, ConfigError, load_config
from ostinato.config.loading import short_names
from ostinato.config.table import DOC, render, rows, stale


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ostinato.toml"
    path.write_text(text)
    return path


FILE = """
[server]
port = 8001
data_dir = "from-file"
[approvals]
timeout = 30
[models.tiers]
forte = "openai:gpt-4.1"
"""


def test_each_layer_wins_over_the_ones_below(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    config, _ = load_config(path, env={})
    assert (config.server.port, config.server.data_dir, config.approvals.timeout) == (
        8001,
        "from-file",
        30,
    )
    short = {"OSTINATO_DATA_DIR": "from-short", "OSTINATO_TIER_FORTE": "openai:gpt-5"}
    config, _ = load_config(path, env=short)
    assert config.server.data_dir == "from-short"
    assert config.models.tiers == {"forte": "openai:gpt-5"}
    nested = {**short, "OSTINATO_SERVER__DATA_DIR": "from-nested", "OSTINATO_SERVER__PORT": "8002"}
    config, _ = load_config(path, env=nested)
    assert (config.server.data_dir, config.server.port) == ("from-nested", 8002)
    flags = {"server": {"data_dir": "from-flag"}}
    config, _ = load_config(path, env=nested, overrides=flags)
    assert (config.server.data_dir, config.server.port) == ("from-flag", 8002)
    assert load_config(None, env={})[0] == Config()  # nothing given: the defaults


def test_every_setting_can_come_from_the_environment() -> None:
    env = {
        "OSTINATO_SERVER__ALLOWED_ORIGINS": "https://a.example, https://b.example",
        "OSTINATO_TOOLS__FETCH_ALLOW_HOSTS": '["docs.example.com"]',
        "OSTINATO_TOOLS__DISABLED": '["shell"]',
        "OSTINATO_MODELS__CONTEXT_WINDOWS": "tiny=2000, small=8000",
        "OSTINATO_MEMORY__EXTRACT_FACTS": "false",
        "OSTINATO_MODELS__ALLOW_CALLER_BASE_URL": "1",
        "OSTINATO_AGENTS": '[{"id": "helper", "tools": ["clock"]}]',
        "OSTINATO_API_KEY": "sk-local",
    }
    config, _ = load_config(None, env=env)
    assert config.server.allowed_origins == ["https://a.example", "https://b.example"]
    assert config.tools.fetch_allow_hosts == ["docs.example.com"]
    assert config.tools.disabled == ["shell"]
    assert config.models.context_windows == {"tiny": 2000, "small": 8000}
    assert config.memory.extract_facts is False
    assert config.models.allow_caller_base_url is True
    assert config.agents[0].tools == ["clock"]
    assert config.models.api_key is not None
    assert config.models.api_key.get_secret_value() == "sk-local"
    assert "sk-local" not in repr(config)


def test_every_short_name_is_kept() -> None:
    names = {name for _, name in short_names(Config)}
    assert names == {
        "OSTINATO_DATABASE_URL",
        "OSTINATO_DATA_DIR",
        "OSTINATO_URL",
        "OSTINATO_KEY",
        "OSTINATO_ALLOWED_ORIGINS",
        "OSTINATO_MODEL",
        "OSTINATO_TIER_",
        "OSTINATO_BASE_URL",
        "OSTINATO_API_KEY",
        "OSTINATO_ALLOW_CALLER_BASE_URL",
        "OSTINATO_THINKING_BUDGET",
        "OSTINATO_REASONING_EFFORT",
        "OSTINATO_CONTEXT_WINDOWS",
        "OSTINATO_APPROVAL_TIMEOUT",
        "OSTINATO_MEMORY_CAPACITY",
        "OSTINATO_EMBEDDING_MODEL",
        "OSTINATO_FETCH_ALLOW_HOSTS",
    }


def test_a_bad_value_names_where_it_came_from(tmp_path: Path) -> None:
    env = {
        "OSTINATO_MEMORY_CAPACITY": "lots",
        "OSTINATO_SERVER__PORT": "eighty",
        "OSTINATO_CONTEXT_WINDOWS": "nonsense",
        "OSTINATO_AGENTS": '[{"id": "a", "max_model_calls": 0}]',
    }
    with pytest.raises(ConfigError) as error:
        load_config(None, env=env, overrides={"approvals": {"timeout": -1}})
    problems = error.value.problems
    assert len(problems) == 5
    expected = {
        "memory.capacity": "(from OSTINATO_MEMORY_CAPACITY)",
        "server.port": "(from OSTINATO_SERVER__PORT)",
        "models.context_windows: 'nonsense' is not 'name=number'": "(from OSTINATO_CONTEXT_",
        "agents[0].max_model_calls": "(from OSTINATO_AGENTS)",
        "approvals.timeout": "(from the command line)",
    }
    for start, origin in expected.items():
        assert any(p.startswith(start) and origin in p for p in problems), (start, problems)


def test_a_list_in_the_environment_that_is_not_json_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r'field "agents".*give it as JSON'):
        load_config(None, env={"OSTINATO_AGENTS": "helper"})


def test_the_documented_report(tmp_path: Path) -> None:
    """The example in docs/configuration.md."""
    path = write(
        tmp_path,
        "[server]\ndatabse_url = 'x'\n[[agents]]\nid = 'a'\n[[agents]]\nid = 'b'\ntier = 'fast'\n",
    )
    with pytest.raises(ConfigError) as error:
        load_config(path, env={"OSTINATO_APPROVAL_TIMEOUT": "soon"})
    assert error.value.problems == [
        "server.databse_url: unknown setting (check its spelling and section)",
        "approvals.timeout: Input should be a valid number, unable to parse string as a "
        "number (from OSTINATO_APPROVAL_TIMEOUT)",
        "agents[1].tier: unknown tier 'fast' (known: allegro, forte, minuet; or give a "
        "provider:model id)",
    ]
    assert "approvals.timeout: Input should be a valid number" in DOC.read_text()


def test_a_wrong_entry_set_aside_keeps_the_others_in_their_places(tmp_path: Path) -> None:
    text = """
[[agents]]
persona = "no id"
[[agents]]
id = "b"
tier = "fast"
[[tools.mcp]]
name = "m"
risk = "dangerous"
url = "ftp://x"
"""
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, text), env={})
    problems = error.value.problems
    assert "agents[0].id: Field required" in problems
    assert any(p.startswith("tools.mcp[0].risk: Input should be") for p in problems)
    assert any(p.startswith("agents[1].tier: unknown tier 'fast'") for p in problems)
    assert "tools.mcp[0].url: an MCP server's url must be http(s)" in problems


def test_the_settings_table_in_the_docs_is_fresh() -> None:
    assert not stale(), "docs/configuration.md is stale: run python -m ostinato.config.table"


def test_the_table_has_every_setting() -> None:
    table = render()
    names = set(rows())
    for section, info in Config.model_fields.items():
        assert f"[{section}]" in table or f"[[{section}]]" in table
        annotation = info.annotation
        model = annotation if isinstance(annotation, type) else None
        if model is not None:
            assert set(model.model_fields) <= names
