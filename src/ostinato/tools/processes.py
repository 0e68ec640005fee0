"""The process groups a server's ``shell`` commands run in, written down while they run,
so that after a crash (SIGKILL, power loss: no shutdown code ran) the next start finds the
groups whose server is gone and stops them (``stop_left``), rather than leaving a command
running that its turn reports "outcome unknown" for.

Each running command is one file ``<folder>/<pgid>``: the command's process group, and the
server process that started it (its pid and start time, so a reused pid is not mistaken
for it). A server running (another ``--workers`` process on the same data dir) keeps its
commands: only groups whose server is gone are stopped. Linux reads start times from
``/proc``; elsewhere nothing is written and nothing is stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)
FOLDER = "processes"  # under the data dir
CONTEXT_KEY = "processes"  # where a turn's tools find the folder (``ToolContext.extras``)


def started(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat``), or None
    when there is no such process (or no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22, after the command's name


@contextlib.contextmanager
def written(folder: Path | None, pgid: int) -> Iterator[None]:
    """Write down the running group ``pgid`` for as long as the block runs."""
    me = os.getpid()
    mine = started(me)
    if folder is None or mine is None:
        yield
        return
    path = folder / str(pgid)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        leader = started(pgid)
        entry = {"server": me, "server_started": mine, "group": pgid, "leader_started": leader}
        path.write_text(json.dumps(entry))
    except OSError as exc:  # a full disk: the command runs all the same
        log.warning("could not write down process group %d: %s", pgid, exc)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def stop_left(folder: Path) -> list[int]:
    """SIGKILL every written-down group whose server is gone; the groups stopped."""
    stopped: list[int] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return stopped
    for path in entries:
        try:
            entry = json.loads(path.read_text())
            server, group = int(entry["server"]), int(entry["group"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if started(server) == entry.get("server_started"):
            continue  # its server runs: its command is its business
        if _still_the_command(group, entry.get("leader_started")):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
                stopped.append(group)
        path.unlink(missing_ok=True)
    if stopped:
        log.warning("stopped %d command(s) a stopped server left running", len(stopped))
    return stopped


def _still_the_command(group: int, leader_started: object) -> bool:
    """Whether group ``group`` is still the command's: its leader (pid ``group``) is the
    same process, or gone (a pid is never reused while a group with that id has members,
    so the members left are the command's)."""
    now = started(group)
    return now is None or now == leader_started
