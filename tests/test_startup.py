"""Start-up stays cheap: heavy libraries are imported when they are used, not before.
(Times are measured by bench/startup.py; these tests only check what gets imported.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def imported_after(statement: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of ``candidates`` a fresh interpreter has imported after ``statement``."""
    code = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps(sorted(m for m in {candidates!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_importing_the_server_imports_no_provider_sdk_mcp_alembic_or_yaml() -> None:
    # httpx2 is the SDKs' HTTP client; jwt is for auth mode oidc only; httpx and jsonschema
    # load with the first fetch and the first tool schema
    heavy = ("anthropic", "openai", "httpx2", "httpx", "jsonschema", "mcp", "alembic", "yaml")
    heavy += ("sqlalchemy", "jwt")
    assert imported_after("import ostinato.server", heavy) == []


def test_importing_the_server_defers_what_only_a_request_or_a_store_url_needs() -> None:
    """The in-memory store (for ``memory://`` and tests) and the background jobs'
    registry and gate (for ``/v1/jobs``) load when first used."""
    deferred: tuple[str, ...] = ("ostinato.store.memory", "ostinato.store.memory_writes")
    deferred += ("ostinato.background.registry", "ostinato.background.gating")
    deferred += ("ostinato.memory.consolidation", "ostinato.memory.episodes")
    assert imported_after("import ostinato.server", deferred) == []
    used = "import ostinato.server\nfrom ostinato.store import MemoryStore\nMemoryStore()"
    assert imported_after(used, deferred[:1]) == ["ostinato.store.memory"]


def test_the_routes_are_defined_when_the_first_app_is_built() -> None:
    """Declaring the routes (FastAPI builds each one's models) is most of the server's
    import: ``import ostinato.server`` leaves it to ``create_app``."""
    routes = ("ostinato.server.routes", "ostinato.server.routes.turns", "ostinato.server.ai_sdk")
    routes += ("ostinato.server.openai_compat", "ostinato.server.page")
    assert imported_after("import ostinato.server", routes) == []
    built = (
        "import ostinato.server\nfrom ostinato.runtime import Runtime\n"
        "from ostinato.store import MemoryStore\nfrom ostinato.models.offline import OfflineModel\n"
        "ostinato.server.create_app(Runtime(MemoryStore(), model=OfflineModel()))"
    )
    assert imported_after(built, routes) == sorted(routes)


def test_building_the_app_leaves_the_mcp_sdk_to_the_first_mcp_request() -> None:
    """``/mcp`` is declared with the routes; the SDK it serves with (a third of a second
    of imports) is loaded by its first request, or by ``serve`` once it listens."""
    built = (
        "import asyncio, ostinato.server\nfrom ostinato.runtime import Runtime\n"
        "from ostinato.store import MemoryStore\nfrom ostinato.models.offline import OfflineModel\n"
        "app = ostinato.server.create_app(Runtime(MemoryStore(), model=OfflineModel()))"
    )
    assert imported_after(built, ("mcp", "mcp_types")) == []
    prepared = built + "\nasyncio.run(ostinato.server.prepare(app))"
    assert imported_after(prepared, ("mcp", "mcp_types")) == ["mcp", "mcp_types"]


def test_one_section_of_the_configuration_loads_only_its_modules() -> None:
    """The server needs ``config.background`` (schedules): not the settings' layers, the
    tools' sources or the rest, which ``ostinato.config`` loads when a name is used."""
    rest = ("ostinato.config.settings", "ostinato.config.tools", "ostinato.config.requests")
    assert imported_after("import ostinato.server", rest) == []
    import ostinato.config as config

    assert sorted(config.__all__) == sorted(config._WHERE)  # every public name is found
    assert [getattr(config, name) for name in config.__all__]
    assert imported_after("from ostinato.config import load_config", rest[:2]) == list(rest[:2])


def test_settings_sections_build_their_validators_when_first_used() -> None:
    """``defer_build``: the server defines the sections (auth, background) at import;
    their validators are built when a configuration is first read."""
    code = (
        "import json, ostinato.server\n"
        "from ostinato.config.background import BackgroundSection\n"
        "from ostinato.identity.settings import AuthSettings\n"
        "before = [BackgroundSection.__pydantic_complete__, AuthSettings.__pydantic_complete__]\n"
        "BackgroundSection(), AuthSettings()\n"
        "after = [BackgroundSection.__pydantic_complete__, AuthSettings.__pydantic_complete__]\n"
        "print(json.dumps([before, after]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[False, False], [True, True]]


def test_the_command_line_imports_nothing_heavy_before_a_command_runs() -> None:
    heavy = ("pydantic", "fastapi", "sqlalchemy", "uvicorn", "httpx", "ostinato.config")
    assert imported_after("import ostinato.cli.main", heavy) == []
    from ostinato.cli.main import DANGER_FLAG
    from ostinato.identity.binding import DANGER_FLAG as BINDING_FLAG

    assert DANGER_FLAG == BINDING_FLAG


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({"OSTINATO_TOOLS__MCP": '[{"name": "m", "command": "x"}]'}, ["mcp"]),
    ],
)
def test_serve_imports_mcp_and_yaml_only_for_a_configuration_that_names_them(
    env: dict[str, str], expected: list[str]
) -> None:
    """Building the deployment with no MCP server and no OpenAPI document imports
    neither the MCP SDK nor YAML (nor a provider SDK for the offline model)."""
    statement = (
        "import asyncio, pathlib, tempfile\n"
        "from ostinato.config import load_config\n"
        "from ostinato.deployment import build_runtime\n"
        "from ostinato.models.offline import OfflineModel\n"
        "from ostinato.store.memory import MemoryStore\n"
        f"config, _ = load_config(None, env={env!r})\n"
        "async def main():\n"
        "    d = await build_runtime(config, MemoryStore(), default_model=OfflineModel(),\n"
        "        default_id='offline:ostinato', data_dir=pathlib.Path(tempfile.mkdtemp()))\n"
        "    await d.aclose()\n"
        "asyncio.run(main())"
    )
    assert imported_after(statement, ("mcp", "yaml", "anthropic", "openai")) == expected
