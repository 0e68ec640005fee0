"""``ostinato serve``'s model setup and start-up failures (the server itself is tested
end to end in tests/e2e)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request

from ostinato.cli.main import build_parser, main, serve_overrides
from ostinato.cli.serve import ModelSetup, data_dir_of
from ostinato.config import ConfigError, load_config
from ostinato.errors import InvalidRequest
from ostinato.identity.binding import LOOPBACK_NAMES, allowed_hosts, refuse_bind
from ostinato.identity.settings import AuthSettings
from ostinato.models.choice import DefaultModel, Tiers
from ostinato.models.offline import OfflineModel
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.memory import MemoryStore
from tests.serve_script import run_serve_script


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "headers": raw})


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> ModelSetup:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    default = DefaultModel("offline:ostinato", "test")
    return ModelSetup(default, Tiers.for_default(default.model_id), OfflineModel())


def test_requests_choose_their_model_by_header(setup: ModelSetup) -> None:
    assert setup.choose(_request({})) is None
    chosen = setup.choose(_request({"x-ostinato-model-id": "offline:"}))
    assert isinstance(chosen, OfflineModel)
    with pytest.raises(InvalidRequest, match="ANTHROPIC_API_KEY"):
        setup.choose(_request({"x-ostinato-model-id": "anthropic:claude-haiku-4-5"}))
    with pytest.raises(InvalidRequest, match="not allowed"):
        setup.choose(
            _request({"x-ostinato-model-id": "ollama:x", "x-ostinato-model-base-url": "http://h"})
        )


async def test_a_bad_model_header_is_a_422(setup: ModelSetup) -> None:
    app = create_app(Runtime(MemoryStore(), model=setup.model), choose_model=setup.choose)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test"
    ) as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        response = await client.post(
            f"/v1/conversations/{cid}/turns",
            json={"text": "hi"},
            headers={"x-ostinato-model-id": "nowhere:model"},
        )
    assert response.status_code == 422
    assert "unknown model provider 'nowhere'" in response.json()["error"]["message"]


def test_serve_refuses_a_database_url_it_cannot_open(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9/v1")  # nothing answers
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL", "OSTINATO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["serve", "--port", "9", "--database-url", "mysql://nope"]) == 2
    assert "ostinato serve:" in capsys.readouterr().err


def _settings(argv: list[str], env: dict[str, str]) -> tuple[Path, float, int]:
    config, _ = load_config(
        None, env=env, overrides=serve_overrides(build_parser().parse_args(argv))
    )
    return data_dir_of(config), config.approvals.timeout, config.server.port


def test_serve_settings_come_from_flags_then_environment_then_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _settings(["serve"], {}) == (tmp_path / "ostinato-data", 300, 8000)
    env = {
        "OSTINATO_DATA_DIR": str(tmp_path / "env"),
        "OSTINATO_APPROVAL_TIMEOUT": "12.5",
        "OSTINATO_SERVER__PORT": "8123",
    }
    assert _settings(["serve"], env) == (tmp_path / "env", 12.5, 8123)
    flags = ["serve", "--data-dir", str(tmp_path / "flag"), "--approval-timeout", "7"]
    assert _settings([*flags, "--port", "9000"], env) == (tmp_path / "flag", 7, 9000)


@pytest.mark.parametrize("bad", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_approval_timeout_from_the_environment_is_named(bad: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(None, env={"OSTINATO_APPROVAL_TIMEOUT": bad})
    (problem,) = error.value.problems
    assert problem.startswith("approvals.timeout: ")
    assert problem.endswith("(from OSTINATO_APPROVAL_TIMEOUT)")


async def test_the_runtime_gets_the_data_dir_and_the_approval_timeout(tmp_path: Path) -> None:
    from ostinato.deployment import build_runtime

    overrides = {"approvals": {"timeout": 42.0}, "server": {"data_dir": str(tmp_path / "data")}}
    config, _ = load_config(None, env={}, overrides=overrides)
    deployment = await build_runtime(
        config,
        MemoryStore(),
        default_model=OfflineModel(),
        default_id="offline:ostinato",
        data_dir=data_dir_of(config),
    )
    runtime = deployment.runtime
    assert runtime.data_dir == tmp_path / "data"
    assert runtime.consent.policy.timeout == 42.0
    names = {t.name for t in (await runtime.mount.registry()).registry}
    assert {"read_file", "write_file", "list_files", "shell"} <= names


def test_serve_refuses_a_bad_approval_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "9", "--approval-timeout", "0"]) == 2
    err = capsys.readouterr().err
    assert "approvals.timeout: Input should be greater than 0 (from the command line)" in err


def test_serve_refuses_a_public_address_without_auth(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("OSTINATO_AUTH__MODE",):
        monkeypatch.delenv(name, raising=False)
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        assert main(["serve", "--host", host, "--port", "9"]) == 2
        error = capsys.readouterr().err
        assert f"refusing to listen on {host}" in error
        assert "--dangerously-serve-without-auth" in error and "docs/auth.md" in error


def test_which_hosts_a_server_answers_to() -> None:
    none, keys = AuthSettings(), AuthSettings(mode="keys")
    assert refuse_bind(none, "127.0.0.1", dangerously_public=False) is None
    assert refuse_bind(none, "localhost", dangerously_public=False) is None
    assert refuse_bind(none, "0.0.0.0", dangerously_public=True) is None
    assert refuse_bind(keys, "0.0.0.0", dangerously_public=False) is None
    assert allowed_hosts(none, "127.0.0.1", dangerously_public=False) == LOOPBACK_NAMES
    assert allowed_hosts(none, "0.0.0.0", dangerously_public=True) is None
    assert allowed_hosts(keys, "127.0.0.1", dangerously_public=False) is None


SWAGGER = '{"swagger": "2.0", "info": {"title": "old", "version": "1"}, "paths": {}}'


async def _started(tmp_path: Path, text: str, default_id: str = "offline:ostinato") -> str:
    """The banner ``serve`` prints for a config file (the deployment built, its sources
    listed once)."""
    from ostinato.cli.banner import banner, tool_warnings
    from ostinato.deployment import build_runtime

    path = tmp_path / "ostinato.toml"
    path.write_text(text)
    config, source = load_config(path, env={})
    default = DefaultModel(default_id, "test")
    deployment = await build_runtime(
        config,
        MemoryStore(),
        default_model=OfflineModel(),
        default_id=default_id,
        data_dir=tmp_path / "data",
    )
    setup = ModelSetup(default, Tiers.for_default(default_id), OfflineModel())
    out = io.StringIO()
    try:
        warnings = await tool_warnings(config, deployment)
        banner(config, source, setup.default, deployment, warnings, out)
    finally:
        await deployment.aclose()
    return out.getvalue()


async def test_the_banner_names_failed_sources_and_unknown_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "old.json").write_text(SWAGGER)
    text = f"""
[[agents]]
id = "helper"
tools = ["clock", "calculater"]
[[tools.mcp]]
name = "broken"
command = "mcp-server-tiem"
[[tools.openapi]]
name = "old"
url = "{tmp_path / "old.json"}"
"""
    shown = await _started(tmp_path, text)
    assert "  FAILED:   openapi:old: cannot load" in shown and "not Swagger 2.0" in shown
    assert "  FAILED:   mcp:broken: McpServerUnavailable: could not start" in shown
    assert (
        "  WARNING:  agents 'helper'.tools: no tool is named 'calculater' "
        "(did you mean 'calculator'?)" in shown
    )
    assert "  tools:    builtins (" in shown
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("tool source mcp:broken failed" in m for m in logged)
    assert any("tool source openapi:old failed" in m for m in logged)
    assert any("no tool is named 'calculater'" in m for m in logged)


async def test_fact_extraction_is_shown_and_off_by_default_on_a_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = await _started(tmp_path, "")
    assert "  memory:   fact extraction off (the default for this model;" in local
    forced = await _started(tmp_path, "[memory]\nextract_facts = true\n")
    assert "  memory:   fact extraction ON: after each answered turn, one more call to " in forced
    assert "(set by memory.extract_facts)" in forced
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # no call is made
    hosted = await _started(tmp_path, "", default_id="anthropic:claude-sonnet-4-5")
    assert "fact extraction ON: after each answered turn, one more call to anthropic:" in hosted


@pytest.mark.parametrize(
    ("summarizer", "env", "on"),
    [
        ("offline:ostinato", {}, False),
        ("ollama:qwen3", {}, False),
        ("llamacpp:smollm2", {}, False),
        ("openai-compatible:x", {}, False),
        ("openai-chat:x", {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, False),
        ("openai:gpt-4.1-mini", {}, True),
        ("anthropic:claude-haiku-4-5", {}, True),
        ("groq:llama", {}, True),
    ],
)
def test_fact_extraction_by_default_only_on_a_hosted_model(
    summarizer: str, env: dict[str, str], on: bool
) -> None:
    from ostinato.deployment import extracts_facts

    assert extracts_facts(load_config(None, env={})[0], summarizer, env) is on
    forced = load_config(None, env={"OSTINATO_MEMORY__EXTRACT_FACTS": str(not on)})[0]
    assert extracts_facts(forced, summarizer, env) is (not on)


def test_a_postgres_url_without_the_driver_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def without_asyncpg(name: str, *args: object) -> object:
        return None if name == "asyncpg" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_asyncpg)
    monkeypatch.setenv("OSTINATO_MODEL", "offline:ostinato")
    url = "postgresql://ann:secret@127.0.0.1:9/db"
    assert main(["serve", "--port", "9", "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert err == (
        "ostinato serve: a PostgreSQL store needs the asyncpg driver, which is not "
        "installed: pip install 'ostinato[postgres]'\n"
    )


def test_a_server_that_cannot_listen_exits_before_opening_the_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second server on a taken port must change nothing (its recovery never runs)."""
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9/v1")  # nothing answers
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OSTINATO_BASE_URL", "OSTINATO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    database = tmp_path / "never.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        argv = ["serve", "--port", port, "--database-url", f"sqlite:///{database}"]
        assert main([*argv, "--data-dir", str(tmp_path / "data")]) == 1
    assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err
    assert not database.exists()


def test_the_shutdown_grace_is_a_setting() -> None:
    assert load_config(None, env={})[0].server.shutdown_grace_s == 10
    config, _ = load_config(None, env={"OSTINATO_SERVER__SHUTDOWN_GRACE_S": "2.5"})
    assert config.server.shutdown_grace_s == 2.5
    config, _ = load_config(None, env={"OSTINATO_SERVER__SHUTDOWN_GRACE_S": "0"})
    assert config.server.shutdown_grace_s == 0  # cancel at once
    for bad in ("-1", "soon", "inf", "nan"):
        with pytest.raises(ConfigError, match="shutdown_grace_s"):
            load_config(None, env={"OSTINATO_SERVER__SHUTDOWN_GRACE_S": bad})


def test_the_collector_is_off_while_serve_starts_and_on_however_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    import ostinato.cli.serve as serve_module

    seen: list[bool] = []

    async def fake_serve(*args: object, **kwargs: object) -> int:
        seen.append(gc.isenabled())
        raise RuntimeError("start-up failed")

    monkeypatch.setattr(serve_module, "serve", fake_serve)
    with pytest.raises(RuntimeError):
        main(["serve", "--port", "1"])
    assert seen == [False] and gc.isenabled()


WATCH_SERVE = """
import gc, json, os, signal, sys, threading, time, urllib.request
from ostinato.cli.main import main
port = sys.argv[1]
def watch():
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except Exception:
            time.sleep(0.05)
    print(json.dumps([gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()]), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=watch, daemon=True).start()
sys.exit(main(["serve", "--port", port, "--database-url", "memory://"]))
"""


def test_a_started_server_has_frozen_what_start_up_made_and_collects_again(
    tmp_path: Path,
) -> None:
    import json

    from ostinato.cli.serve import COLLECTOR_THRESHOLDS

    done = run_serve_script(WATCH_SERVE, cwd=tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert lines, done.stdout + done.stderr
    enabled, frozen, thresholds = json.loads(lines[-1])
    assert enabled is True and frozen > 10_000
    assert tuple(thresholds) == COLLECTOR_THRESHOLDS
    # SIGTERM ends it after the graceful shutdown: uvicorn raises the signal again on exit
    assert done.returncode in (0, -15), done.stderr
    assert "Application shutdown complete" in done.stderr
