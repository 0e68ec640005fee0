"""The configuration file: validation with locations, env overrides, guidelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ostinato.config import ConfigError, guidelines_for, load_config

GOOD = """
[models]
default = "openai:gpt-4.1-mini"
[models.tiers]
minuet = "openai:gpt-4.1-nano"

[guidelines]
rules = ["Answer in the user's language.", "Never use em dashes."]

[[agents]]
id = "assistant"
persona = "Ada"
prompt = "You help. Never use em dashes."
tools = ["clock", "calculator"]
default = true

[[agents]]
id = "coder"
tier = "forte"
max_model_calls = 20

[[tools.mcp]]
name = "files"
command = "python"
args = ["-m", "server"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ostinato.toml"
    path.write_text(text)
    return path


def test_a_good_file_loads(tmp_path: Path) -> None:
    config, source = load_config(write(tmp_path, GOOD), env={})
    assert source.endswith("ostinato.toml")
    assert config.default_agent().id == "assistant"
    assert config.agents[1].max_model_calls == 20
    assert config.tools.mcp[0].args == ["-m", "server"]


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    env = {
        "OSTINATO_MODEL": "anthropic:claude-sonnet-4-5",
        "OSTINATO_TIER_FORTE": "openai:gpt-5",
        "OSTINATO_DATABASE_URL": "sqlite:///other.db",
    }
    config, _ = load_config(write(tmp_path, GOOD), env=env)
    assert config.models.default == "anthropic:claude-sonnet-4-5"
    assert config.models.tiers == {"minuet": "openai:gpt-4.1-nano", "forte": "openai:gpt-5"}
    assert config.server.database_url == "sqlite:///other.db"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[agents]]\nid = 'a'\ntier = 'fast'\n", "agents[0].tier: unknown tier 'fast'"),
        ("[[agents]]\nid = 'a'\nmax_model_calls = 0\n", "agents[0].max_model_calls"),
        ("[[agents]]\nid = 'a'\n[[agents]]\nid = 'a'\n", "repeated: a"),
        ("[server]\ndatabse_url = 'x'\n", "server.databse_url: unknown setting"),
        ("[models.tiers]\nminuet = 'gpt'\n", "models.tiers.minuet: 'gpt' is not a provider:model"),
        ("[[tools.mcp]]\nname = 'm'\n", "tools.mcp[0]: give exactly one of 'command' or 'url'"),
        ("[[agents]]\nid = 'Bad Id'\n", "agents[0].id"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_errors_say_what_and_where(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, text), env={})
    assert any(expected in problem for problem in error.value.problems), error.value.problems


def test_missing_file_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", env={})
    monkeypatch.chdir(tmp_path)
    config, source = load_config(env={})
    assert source == "built-in defaults" and config.default_agent().id == "assistant"


def test_guidelines_are_appended_once_per_rule() -> None:
    prompt = guidelines_for(
        "You help. Never use em dashes.", ["never use  EM dashes.", "Be brief.", "be brief."]
    )
    assert prompt.count("em dashes") == 1 and prompt.endswith("- Be brief.")
    assert guidelines_for("Plain.", []) == "Plain."
