"""A real MCP server from PyPI: ``mcp-server-time`` (pinned in the dev extra), mounted as
docs/tools.md tells an operator to, with a ``[[tools.mcp]]`` entry in ``ostinato.toml``.

Its tools are listed (``GET /v1/tools``, ``/v1/tools/sources``, the banner,
``check-config``), a turn with a scripted model calls one and gets the server's real
answer, and ``ostinato replay --config`` reproduces that conversation (without the file
the tool is not there and the replay diverges).
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from ostinato.cli.main import main
from ostinato.config import load_config
from ostinato.deployment import Deployment, build_runtime
from ostinato.messages import ToolResultBlock, ToolUseBlock
from ostinato.models.scripted import ScriptedModel, Step, text_step, tool_step
from ostinato.server import create_app
from ostinato.store import open_store
from ostinato.store.base import Store

TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(
    TIME_SERVER is None, reason="needs mcp-server-time from the dev extra (pip install -e '.[dev]')"
)
# 14:00 in UTC is 23:00 in Tokyo on any day (Japan keeps no summer time).
CONVERT = {"source_timezone": "Etc/UTC", "time": "14:00", "target_timezone": "Asia/Tokyo"}


def time_config(tmp_path: Path) -> Path:
    """The operator's file, as docs/tools.md's Configuration section shows it."""
    path = tmp_path / "ostinato.toml"
    path.write_text(
        f"""
[[tools.mcp]]
name = "time"
command = "{TIME_SERVER}"
args = ["--local-timezone", "Etc/UTC"]
risk = "safe"
"""
    )
    return path


def steps() -> list[Step]:
    return [tool_step(("time_convert_time", CONVERT)), text_step("It is 23:00 in Tokyo.")]


async def deployed(path: Path, store: Store, model: ScriptedModel, data: Path) -> Deployment:
    config, _ = load_config(path, env={})
    deployment = await build_runtime(
        config, store, default_model=model, default_id=model.name, data_dir=data
    )
    deployment.runtime.after_turn = None  # no fact extraction: the script is the turns'
    return deployment


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Deployment, ScriptedModel]]:
    from ostinato.store.memory import MemoryStore

    model = ScriptedModel(steps())
    deployment = await deployed(time_config(tmp_path), MemoryStore(), model, tmp_path / "data")
    try:
        yield deployment, model
    finally:
        await deployment.runtime.close()
        await deployment.aclose()


async def test_its_tools_are_listed_with_the_servers_schema(
    running: tuple[Deployment, ScriptedModel],
) -> None:
    deployment, _ = running
    app = create_app(deployment.runtime, model_name="scripted", store_name="memory")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        tools = {t["name"]: t for t in (await client.get("/v1/tools")).json()["tools"]}
        sources = (await client.get("/v1/tools/sources")).json()["sources"]
    assert {"time_get_current_time", "time_convert_time"} <= set(tools)
    convert = tools["time_convert_time"]
    assert convert["risk"] == "safe" and convert["category"] == "read"  # read-only hint
    mounted = (await deployment.runtime.mount.registry()).registry.get("time_convert_time")
    assert mounted is not None and mounted.untrusted  # content from another program
    assert set(mounted.parameters["required"]) == set(CONVERT)  # the server's schema
    time = next(s for s in sources if s["name"] == "mcp:time")
    assert time["state"] == "ok" and time["tools"] == 2


async def test_a_turn_calls_one_of_its_tools_and_gets_the_real_answer(
    running: tuple[Deployment, ScriptedModel],
) -> None:
    deployment, model = running
    runtime = deployment.runtime
    cid = (await runtime.create_conversation()).id
    result = await runtime.run_turn(cid, "What time is 14:00 UTC in Tokyo?")
    model.assert_consumed()
    assert result.stop_reason == "end_turn"
    blocks = [b for row in await runtime.store.list_messages(cid) for b in row.blocks]
    (call,) = [b for b in blocks if isinstance(b, ToolUseBlock) and b.name == "time_convert_time"]
    answers = [b for b in blocks if isinstance(b, ToolResultBlock) and b.tool_use_id == call.id]
    assert len(answers) == 1 and not answers[0].is_error, answers
    answer = json.loads(answers[0].text)  # the server's own structured answer
    assert answer["source"]["timezone"] == "Etc/UTC"
    assert answer["target"]["timezone"] == "Asia/Tokyo"
    assert answer["target"]["datetime"][11:16] == "23:00"


async def test_the_banner_and_check_config_show_its_two_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ostinato.cli.banner import banner, tool_warnings
    from ostinato.cli.serve import ModelSetup
    from ostinato.models.choice import DefaultModel, Tiers
    from ostinato.models.offline import OfflineModel
    from ostinato.store.memory import MemoryStore

    path = time_config(tmp_path)
    config, source = load_config(path, env={})
    deployment = await deployed(path, MemoryStore(), ScriptedModel(), tmp_path / "data")
    out = io.StringIO()
    try:
        default = "offline:ostinato"
        setup = ModelSetup(
            DefaultModel(default, "test"), Tiers.for_default(default), OfflineModel()
        )
        warnings = await tool_warnings(config, deployment)
        banner(config, source, setup.default, deployment, warnings, out)
    finally:
        await deployment.aclose()
    tools_line = next(line for line in out.getvalue().splitlines() if "tools:" in line)
    assert ", mcp:time (2)," in tools_line, tools_line
    assert "FAILED" not in out.getvalue()

    monkeypatch.delenv("OSTINATO_CONFIG", raising=False)
    from ostinato.cli.check import check

    checked = io.StringIO()
    assert await check(str(path), start_servers=True, out=checked) == 0, checked.getvalue()
    assert "ostinato.toml: OK" in checked.getvalue()
    assert "tool sources: time" in checked.getvalue()


def test_replay_with_the_config_reproduces_a_conversation_that_used_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """(capfd, not capsys: the MCP SDK hands the server sys.stderr's file descriptor.)"""
    (tmp_path / "etc").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # no ./ostinato.toml: only the file named
    monkeypatch.delenv("OSTINATO_CONFIG", raising=False)
    path = time_config(tmp_path / "etc")
    url = f"sqlite:///{tmp_path / 'time.db'}"

    async def record() -> str:
        store = await open_store(url)
        model = ScriptedModel(steps())
        deployment = await deployed(path, store, model, tmp_path / "data")
        try:
            cid = (await deployment.runtime.create_conversation()).id
            await deployment.runtime.run_turn(cid, "What time is 14:00 UTC in Tokyo?")
        finally:
            await deployment.runtime.close()
            await deployment.aclose()
        model.assert_consumed()
        return cid

    cid = asyncio.run(record())
    assert main(["replay", cid, "--database-url", url, "--config", str(path)]) == 0
    out = capfd.readouterr().out
    assert out.count(": OK") == 1 and out.rstrip().endswith("identical"), out
    assert main(["replay", cid, "--database-url", url]) == 1  # without it: no such tool
    assert "DIVERGED" in capfd.readouterr().out
