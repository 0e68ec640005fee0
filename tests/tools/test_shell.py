"""shell: output, exit codes, a clean environment, deadlines, cancellation, caps."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest

from ostinato.errors import ToolError
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.shell import MAX_TIMEOUT, OUTPUT_CAP, shell
from ostinato.tools.system import workdir_tools


def context(workdir: Path | None) -> ToolContext:
    return ToolContext("conv", "turn", "run", "call", workdir=workdir)


def real(path: Path) -> str:
    return os.path.realpath(path)


def alive(pid: int) -> bool:
    """Running, that is: a zombie nobody reaped (PID 1 here may not) is dead."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


async def until_dead(*pids: int, within: float = 10.0) -> bool:
    """Generous: the group is signalled before the call returns; this only allows for
    the kernel delivering it."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def pids_written(folder: Path, *names: str) -> list[int]:
    for _ in range(500):
        texts = [(folder / name).read_text() if (folder / name).exists() else "" for name in names]
        if all(t.endswith("\n") for t in texts):
            return [int(t) for t in texts]
        await asyncio.sleep(0.02)
    raise AssertionError(f"{names} were never written")


# The shell writes its own pid, starts a grandchild in a subshell (so it is not even the
# shell's child any more) and one in the background, then waits in a child of its own.
FAMILY_OF_SLEEPERS = (
    "echo $$ > shell.pid; (sleep 100 & echo $! > grandchild.pid); "
    "sleep 100 & echo $! > child.pid; wait"
)
PIDS = ("shell.pid", "grandchild.pid", "child.pid")


async def test_output_and_exit_code(tmp_path: Path) -> None:
    result = await shell(context(tmp_path), "echo out; echo err >&2; exit 3")
    assert result["exit_code"] == 3
    assert result["output"] == "out\nerr\n"
    assert result["truncated"] is False
    assert result["duration_s"] >= 0


async def test_runs_in_the_workdir_and_in_a_subdirectory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    here = await shell(context(tmp_path), "pwd; ls")
    assert here["output"] == f"{real(tmp_path)}\nsub\n"
    below = await shell(context(tmp_path), "pwd", cwd="sub")
    assert below["output"] == f"{real(tmp_path / 'sub')}\n"


async def test_cwd_is_jailed(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "out").symlink_to(tmp_path)
    for cwd in ("..", "/tmp", "out"):
        with pytest.raises(ToolError, match=r"outside the workdir|not relative"):
            await shell(context(tmp_path / "work"), "pwd", cwd=cwd)
    with pytest.raises(ToolError, match="no workdir is configured"):
        await shell(context(None), "pwd")


async def test_the_server_environment_is_not_leaked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-children")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    result = await shell(context(tmp_path), "env")
    seen = dict(line.split("=", 1) for line in result["output"].splitlines())
    assert "sk-test" not in result["output"] and "sk-ant" not in result["output"]
    assert "OPENAI_API_KEY" not in seen
    assert seen["HOME"] == str(tmp_path)
    assert set(seen) <= {"PATH", "HOME", "LANG", "TERM", "PAGER", "GIT_TERMINAL_PROMPT", "PWD"}


async def test_stdin_is_closed(tmp_path: Path) -> None:
    result = await shell(context(tmp_path), "cat; echo read-nothing")
    assert result["output"] == "read-nothing\n"


async def test_the_deadline_kills_the_whole_process_group(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="killed after 1 s") as failure:
        await shell(context(tmp_path), f"echo started; {FAMILY_OF_SLEEPERS}", timeout=1)
    assert "started" in failure.value.message  # the partial output comes along
    pids = await pids_written(tmp_path, *PIDS)
    assert await until_dead(*pids)


async def test_cancellation_kills_the_whole_process_group(tmp_path: Path) -> None:
    task = asyncio.create_task(shell(context(tmp_path), FAMILY_OF_SLEEPERS, timeout=300))
    pids = await pids_written(tmp_path, *PIDS)
    assert all(alive(pid) for pid in pids)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await until_dead(*pids)


async def test_a_cancelled_command_tells_what_it_printed(tmp_path: Path) -> None:
    told: list[str] = []
    cut = ToolContext("conv", "turn", "run", "call", workdir=tmp_path, cut_short=told.append)
    command = "for i in 1 2 3 4 5; do echo tick $i; echo $i > at; sleep 1; done"
    task = asyncio.create_task(shell(cut, command, timeout=300))
    at = tmp_path / "at"
    for _ in range(1500):  # until tick 2 is printed, a second in
        if at.exists() and at.read_text() == "2\n":
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (text,) = told
    so_far = json.loads(text)
    assert so_far["output"].startswith("tick 1\ntick 2\n")
    assert so_far["signal"] == "SIGTERM" and so_far["duration_s"] >= 1.0


async def test_the_loops_deadline_cancels_it_too(tmp_path: Path) -> None:
    """The loop wraps a call in ``asyncio.timeout(tool.timeout)``: that is a cancel."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1):
            await shell(context(tmp_path), FAMILY_OF_SLEEPERS, timeout=300)
    assert await until_dead(*await pids_written(tmp_path, *PIDS))


async def test_a_process_ignoring_sigterm_gets_sigkill(tmp_path: Path) -> None:
    command = "(trap '' TERM; exec sleep 100) & echo $! > stubborn.pid; wait"
    with pytest.raises(ToolError, match="killed after"):
        await shell(context(tmp_path), command, timeout=0.5)
    (pid,) = await pids_written(tmp_path, "stubborn.pid")
    assert await until_dead(pid)


async def test_cancelling_reaches_a_process_ignoring_sigterm(tmp_path: Path) -> None:
    command = "(trap '' TERM; exec sleep 100) & echo $! > stubborn.pid; wait"
    task = asyncio.create_task(shell(context(tmp_path), command, timeout=300))
    (pid,) = await pids_written(tmp_path, "stubborn.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await until_dead(pid)


async def test_background_processes_are_stopped_when_the_command_ends(tmp_path: Path) -> None:
    result = await shell(context(tmp_path), "sleep 100 & echo $! > bg.pid; echo done")
    assert result["exit_code"] == 0 and result["output"] == "done\n"
    assert await until_dead(*await pids_written(tmp_path, "bg.pid"))


async def test_megabytes_of_output_are_capped_without_blocking(tmp_path: Path) -> None:
    result = await shell(context(tmp_path), "seq 1 1000000; seq 1 1000 >&2", timeout=120)
    assert result["exit_code"] == 0
    assert result["truncated"] is True
    assert result["output_bytes"] == 6888896 + 3893
    output: str = result["output"]
    assert output.startswith("1\n2\n3\n")
    assert output.endswith("998\n999\n1000\n")  # the tail is kept: errors usually end there
    assert "bytes of output omitted" in output
    assert len(output.encode()) <= OUTPUT_CAP + 100


async def test_endless_output_is_drained_until_the_deadline(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="killed after 1 s") as failure:
        await shell(context(tmp_path), "yes", timeout=1)
    assert len(failure.value.message.encode()) <= OUTPUT_CAP + 200


async def test_argument_limits(tmp_path: Path) -> None:
    for timeout in (0, -1, MAX_TIMEOUT + 1):
        with pytest.raises(ToolError, match="timeout"):
            await shell(context(tmp_path), "true", timeout=timeout)
    with pytest.raises(ToolError, match="empty"):
        await shell(context(tmp_path), "  ")


async def test_the_tool_as_the_loop_sees_it(tmp_path: Path) -> None:
    tool: Tool = {t.name: t for t in workdir_tools()}["shell"]
    assert (tool.category, tool.risk, tool.idempotent) == ("action", "exec", False)
    assert tool.timeout > MAX_TIMEOUT  # the command's own deadline fires first
    assert set(tool.parameters["properties"]) == {"command", "timeout", "cwd"}
    assert tool.family is not None and tool.family({"command": "git status"}) == "git"
    result: dict[str, Any] = await tool.run(
        tool.validate({"command": "echo hi"}), context(tmp_path)
    )
    assert result["output"] == "hi\n"
