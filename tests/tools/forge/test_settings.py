"""``[tools.sandbox]`` sets the limits the sandbox enforces: each one changed in the
settings changes what a run may do (real engine, real workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ostinato.config import ConfigError, load_config
from ostinato.deployment import sandbox_of
from ostinato.tools.forge import SandboxError


@pytest.mark.asyncio
async def test_the_settings_are_the_limits_the_engine_enforces(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(
        "[tools.sandbox]\ncpu_s = 0.3\noutput_bytes = 2048\nworkers = 1\n"
        "fetch_max_bytes = 4096\nfetch_timeout_s = 3\n",
        encoding="utf-8",
    )
    config, _ = load_config(path, env={"OSTINATO_TOOLS__SANDBOX__FETCHES": "1"})
    box = sandbox_of(config)
    try:
        assert box.limits.cpu_s == 0.3 and box.limits.output_bytes == 2048
        assert box.limits.fetches == 1
        assert box.fetcher is not None
        assert box.fetcher.policy.max_bytes == 4096 and box.fetcher.policy.timeout == 3.0
        assert await box.run("() => 'y'.repeat(1500)", {}) == "y" * 1500
        with pytest.raises(SandboxError) as caught:
            await box.run("() => 'y'.repeat(3000)", {})  # fine under the default, not here
        assert caught.value.limit == "output"
        with pytest.raises(SandboxError) as caught:
            await box.run("() => { while (true) {} }", {})
        assert caught.value.limit == "cpu"
        many = (
            "async () => (await Promise.allSettled([fetch('http://127.0.0.1/'),"
            " fetch('http://127.0.0.1/')])).map((r) => r.reason.message)"
        )
        reasons = await box.run(many, {}, network=True)
        assert sum("at most 1 requests a run" in r for r in reasons) == 1
    finally:
        await box.aclose()


def test_a_limit_out_of_range_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text("[tools.sandbox]\nmemory_bytes = 10\ncpu_s = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert "tools.sandbox.memory_bytes" in str(caught.value)
    assert "tools.sandbox.cpu_s" in str(caught.value)
