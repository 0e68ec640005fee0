"""The running commands written down (``tools.processes``): a restart stops the groups a
gone server left, and never a running server's (``--workers`` share a data dir)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ostinato.tools.processes import started, stop_left, written


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def gone_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_gone_server_s_group_is_stopped_a_running_one_s_kept(tmp_path: Path) -> None:
    left, ours = sleeper(), sleeper()
    try:
        entry = {"server": gone_pid(), "server_started": 1, "group": left.pid,
                 "leader_started": started(left.pid)}  # fmt: skip
        (tmp_path / str(left.pid)).write_text(json.dumps(entry))
        with written(tmp_path, ours.pid):  # this process: a server that runs
            assert stop_left(tmp_path) == [left.pid]
            assert (tmp_path / str(ours.pid)).exists()
        assert left.wait(timeout=10) < 0  # killed
        assert ours.poll() is None
        assert list(tmp_path.iterdir()) == []  # the block ended: its entry is gone
    finally:
        for process in (left, ours):
            process.kill()
            process.wait()


def test_a_group_whose_leader_pid_was_reused_is_not_touched(tmp_path: Path) -> None:
    other = sleeper()  # stands for an unrelated process that got the command's pid
    try:
        entry = {"server": gone_pid(), "server_started": 1, "group": other.pid,
                 "leader_started": -1}  # fmt: skip
        (tmp_path / str(other.pid)).write_text(json.dumps(entry))
        assert stop_left(tmp_path) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_start_times_are_read_from_proc() -> None:
    assert started(os.getpid()) is not None
    assert started(gone_pid()) is None


# A server that dies between starting a command and writing its group down: the child
# Python stands for the server, killed (SIGKILL, as a crash) where ``written`` begins.
_DIES_BEFORE_WRITING = """
import asyncio, os, signal, sys
from pathlib import Path
from ostinato.tools import shell

def crash(folder, pgid):
    Path(sys.argv[2]).write_text(str(pgid))
    os.kill(os.getpid(), signal.SIGKILL)

shell.written = crash
asyncio.run(shell.run_command(
    f"touch {sys.argv[1]}; sleep 30", cwd="/", env={"PATH": "/usr/bin:/bin"}, deadline_s=60,
))
"""


def test_a_command_never_starts_when_its_server_dies_before_writing_it_down(
    tmp_path: Path,
) -> None:
    ran, shell_pid = tmp_path / "ran", tmp_path / "shell.pid"
    server = subprocess.run(
        [sys.executable, "-c", _DIES_BEFORE_WRITING, str(ran), str(shell_pid)], timeout=60
    )
    assert server.returncode == -signal.SIGKILL
    pid = int(shell_pid.read_text())
    deadline = time.monotonic() + 10
    while started(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # the shell reads EOF on its gate and exits
    assert started(pid) is None or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not ran.exists()  # the command never ran: nothing was left running unrecorded
