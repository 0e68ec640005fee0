"""Tool sources from the settings (ostinato.sources), checked as `serve` builds them:
`check-config` reports every mistake of a file at once, and an MCP server's `cwd` and
`risk` settings reach it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ostinato.cli.main import main
from ostinato.config import McpSource, load_config
from ostinato.sources import mcp_lister, program_problem
from ostinato.tools.base import ToolContext
from ostinato.tools.mcp import McpClients

FIXTURE_SERVER = Path(__file__).parent / "tools" / "fixtures" / "mcp_server.py"
SWAGGER = {"swagger": "2.0", "info": {"title": "old", "version": "1"}, "paths": {}}
PETS = {
    "openapi": "3.1.0",
    "info": {"title": "pets", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9/api"}],
    "paths": {
        "/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}
    },
}


def six_mistakes(tmp_path: Path) -> Path:
    (tmp_path / "old.json").write_text(json.dumps(SWAGGER))
    (tmp_path / "pets.json").write_text(json.dumps(PETS))
    path = tmp_path / "ostinato.toml"
    path.write_text(
        f"""
[server]
prot = 8000                                   # 1: a misspelt setting

[approvals]
timeout = -5                                  # 2: a value out of range

[[agents]]
id = "helper"
tier = "fast"                                 # 3: an unknown tier
tools = ["clock", "calculater", "fixture_add", "pets_listPets"]   # 4: a misspelt tool

[[tools.mcp]]
name = "fixture"                              # a real server, listed
command = "{sys.executable}"
args = ["{FIXTURE_SERVER}"]

[[tools.mcp]]
name = "git"
command = "mcp-server-gti"                    # 5: a command that does not exist

[[tools.openapi]]
name = "pets"
url = "{tmp_path / "pets.json"}"

[[tools.openapi]]
name = "old"
url = "{tmp_path / "old.json"}"               # 6: a document serve refuses
"""
    )
    return path


def test_check_config_reports_every_mistake_at_once(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OSTINATO_CONFIG", raising=False)
    assert main(["check-config", str(six_mistakes(tmp_path))]) == 1
    lines = capfd.readouterr().out.splitlines()
    assert lines[0].endswith("ostinato.toml: 6 problem(s)"), lines
    problems = [line.strip() for line in lines[1:]]
    assert len(problems) == 6
    starts = [
        "server.prot: unknown setting",
        "approvals.timeout: Input should be greater than 0",
        "agents[0].tier: unknown tier 'fast'",
        "tools.openapi[1]: cannot load",
        "tools.mcp[1].command: 'mcp-server-gti' is not a program on PATH",
        "agents[0].tools: no tool is named 'calculater' (did you mean 'calculator'?)",
    ]
    for start, problem in zip(starts, problems, strict=True):
        assert problem.startswith(start), (start, problems)
    assert "not Swagger 2.0" in problems[3]
    assert "it may be a tool of 'git'" in problems[5]  # the one server that was not listed


def test_check_config_offline_does_not_start_servers(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(
        f'[[agents]]\nid = "a"\ntools = ["fixture_add"]\n'
        f'[[tools.mcp]]\nname = "fixture"\ncommand = "{sys.executable}"\n'
        f'args = ["{FIXTURE_SERVER}"]\n'
    )
    assert main(["check-config", str(path)]) == 0
    assert "OK" in capfd.readouterr().out
    assert main(["check-config", "--offline", str(path)]) == 1
    out = capfd.readouterr().out  # the allow-list cannot be confirmed without listing
    assert "no tool is named 'fixture_add'; it may be a tool of 'fixture'" in out


async def test_an_mcp_servers_cwd_and_risk_come_from_the_settings(tmp_path: Path) -> None:
    source = McpSource(
        name="fixture",
        command=sys.executable,
        args=[str(FIXTURE_SERVER)],
        cwd=str(tmp_path),
        risk="exec",
    )
    clients = McpClients()
    try:
        tools = {t.name: t for t in await mcp_lister(source, clients)(None)}
        where = tools["fixture_where"]
        assert where.risk == "exec" and tools["fixture_pid"].risk == "exec"
        result = await where.run({}, ToolContext("c", "t", "r", "u"))
        assert result == {"result": str(tmp_path)}  # structured content
    finally:
        await clients.aclose()


def test_the_mcp_settings_the_docs_list_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(
        '[[tools.mcp]]\nname = "files"\ncommand = "npx"\ncwd = "/srv"\nrisk = "safe"\n'
        "timeout = 20\nper_user = true\n"
    )
    config, _ = load_config(path, env={})
    (mcp,) = config.tools.mcp
    assert (mcp.cwd, mcp.risk, mcp.timeout, mcp.per_user) == ("/srv", "safe", 20, True)


def test_why_a_command_cannot_start(tmp_path: Path) -> None:
    assert program_problem(McpSource(name="ok", command=sys.executable)) is None
    assert program_problem(McpSource(name="ok", command="python3")) is None
    missing = program_problem(McpSource(name="x", command="no-such-program-here"))
    assert missing == "command: 'no-such-program-here' is not a program on PATH"
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    assert program_problem(McpSource(name="x", command=str(script))) == (
        f"command: {str(script)!r} is not an executable file"
    )
    script.chmod(0o755)
    assert program_problem(McpSource(name="x", command=str(script))) is None
    gone = program_problem(McpSource(name="x", command="python3", cwd=str(tmp_path / "nope")))
    assert gone is not None and gone.startswith("cwd:")
    assert program_problem(McpSource(name="x", url="http://127.0.0.1:9/mcp")) is None
