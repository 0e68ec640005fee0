"""``shell``: run a command in the workdir.

The command runs as ``/bin/sh -c`` in a session of its own (so its whole process group
can be signalled), once that group is written down for a restart to find
(``processes``), with stdin closed, a small explicit environment (nothing of the
server's, such as API keys), a deadline and an output cap. Output is read as it comes,
so a command that writes gigabytes never blocks; the first and last halves of the cap
are kept. When the command ends, times out or is cancelled, its process group gets
SIGTERM, a short grace, then SIGKILL: nothing it started outlives the call. Which calls
a remembered family grant covers is ``ostinato.tools.families``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ostinato.errors import ToolError
from ostinato.tools.base import ToolContext
from ostinato.tools.families import command_family as command_family
from ostinato.tools.families import shell_family as shell_family
from ostinato.tools.processes import CONTEXT_KEY as PROCESSES
from ostinato.tools.processes import written
from ostinato.tools.workdir import Jail

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
OUTPUT_CAP = 64 * 1024  # bytes of combined stdout and stderr kept: first half, last half
SHELL = "/bin/sh"
# The command starts only once its process group is written down (``processes``): the
# shell first reads a line from its stdin, a pipe from the server. A server killed
# before it writes that line closes the pipe, the read ends without one, and the shell
# exits without running the command; given the line, it runs the command in a shell of
# its own (``exec``: the same process, so the same group and the same start time), with
# stdin from /dev/null as before.
_GATED = f'IFS= read -r _ || exit 125; exec {SHELL} -c "$1" < /dev/null'
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
# A child can start in a directory fd's folder through /proc (no race with a path).
_PROC_FD = os.path.isdir("/proc/self/fd")


def shell_env(home: Path | str) -> dict[str, str]:
    """The whole environment a command sees; the server's own is never passed on."""
    return {
        "PATH": SEARCH_PATH,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_TERMINAL_PROMPT": "0",
    }


async def shell(
    context: ToolContext,
    command: str,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the model's name for the deadline
    cwd: str = ".",
) -> dict[str, Any]:
    """Run a shell command (/bin/sh -c) in the workdir and return its exit code and output.

    Stdin is closed; stdout and stderr are combined. A non-zero exit code is a normal
    result. Processes the command leaves running in the background are stopped when it
    ends.

    Args:
        command: The command line, e.g. "ls -la" or "python3 script.py".
        timeout: Seconds before the command is killed (at most 600).
        cwd: The directory to run in, relative to the workdir.
    """
    if not command.strip():
        raise ToolError("the command is empty")
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ToolError(f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds")
    with Jail(context.workdir) as jail, jail.open_directory(cwd) as (cwd_fd, relpath):
        keep: tuple[int, ...]
        if _PROC_FD:
            where, keep = f"/proc/self/fd/{cwd_fd}", (cwd_fd,)
        else:  # no /proc: the path itself, checked just above
            where, keep = str(jail.root / relpath), ()
        result = await run_command(
            command,
            cwd=where,
            env=shell_env(jail.root),
            deadline_s=timeout,
            pass_fds=keep,
            on_cancel=_tell_cut_short(context),
            book=context.extras.get(PROCESSES),
        )
    if result.timed_out:
        so_far = f"output so far:\n{result.output}" if result.output_bytes else "no output"
        raise ToolError(f"the command was killed after {timeout:g} s (its deadline); {so_far}")
    return result.as_dict()


def _tell_cut_short(context: ToolContext) -> Callable[[CommandResult], None] | None:
    """What a cancelled command had printed (and for how long it ran), for its result."""
    tell = context.cut_short
    if tell is None:
        return None
    return lambda result: tell(json.dumps(result.as_dict(), ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None  # None when a signal ended it
    signal: str | None
    output: str  # combined stdout and stderr, cut in the middle past the cap
    output_bytes: int  # all the bytes it wrote, kept or not
    truncated: bool
    duration_s: float
    timed_out: bool

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"exit_code": self.exit_code}
        if self.signal:
            shown["signal"] = self.signal
        shown["output"] = self.output
        shown["truncated"] = self.truncated
        if self.truncated:
            shown["output_bytes"] = self.output_bytes
        shown["duration_s"] = self.duration_s
        return shown


async def run_command(
    command: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    deadline_s: float,
    cap: int = OUTPUT_CAP,
    pass_fds: tuple[int, ...] = (),
    on_cancel: Callable[[CommandResult], None] | None = None,
    book: Path | None = None,
) -> CommandResult:
    """Run ``command`` with ``/bin/sh -c``; stop its process group however this ends.
    Cancelled, it still tells ``on_cancel`` what the command printed before it stopped."""
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    try:  # the reading side is ready before anything runs, so no await comes in between
        transport, capture = await loop.connect_read_pipe(
            lambda: _Capture(cap), os.fdopen(read_end, "rb", buffering=0)
        )
    except BaseException:
        os.close(write_end)
        raise
    started = time.monotonic()
    timed_out = cancelled = False
    try:
        try:
            process = await asyncio.create_subprocess_exec(
                SHELL,
                "-c",
                _GATED,
                SHELL,
                command,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_end,
                stderr=write_end,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                pass_fds=pass_fds,
            )
        finally:
            os.close(write_end)  # the child holds its own copy; EOF comes when all exit
        try:
            with written(book, process.pid):  # a crash's restart finds it (processes.py)
                _open_gate(process)
                async with asyncio.timeout(deadline_s):
                    await process.wait()
        except TimeoutError:
            timed_out = True
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:  # also on cancellation: nothing the command started outlives the call
            await _stop_group(process, capture)
            if cancelled and on_cancel is not None:
                on_cancel(_result(process, capture, cap, started, False))
    finally:
        transport.close()
    return _result(process, capture, cap, started, timed_out)


def _open_gate(process: asyncio.subprocess.Process) -> None:
    """Let the command start (``_GATED``): its line, then EOF."""
    gate = process.stdin
    if gate is not None:
        with suppress(OSError):  # the shell is gone already (killed): nothing to start
            gate.write(b"go\n")
        gate.close()


def _result(
    process: asyncio.subprocess.Process,
    capture: _Capture,
    cap: int,
    started: float,
    timed_out: bool,
) -> CommandResult:
    code = process.returncode
    return CommandResult(
        exit_code=code if code is not None and code >= 0 else None,
        signal=_signal_name(code),
        output=capture.text(),
        output_bytes=capture.total,
        truncated=capture.total > cap,
        duration_s=round(time.monotonic() - started, 3),
        timed_out=timed_out,
    )


async def _stop_group(process: asyncio.subprocess.Process, capture: _Capture) -> None:
    """SIGTERM the command's process group, give it a grace, then SIGKILL what is left.

    "Gone" means the shell has exited and nobody holds the output pipe any more; a
    process that left the group (``setsid``) and keeps the pipe open is not waited for.
    """

    async def gone() -> None:
        await process.wait()
        await capture.closed.wait()

    _signal_group(process.pid, signal.SIGTERM)
    try:
        async with asyncio.timeout(KILL_GRACE):
            await gone()
    except TimeoutError:
        pass
    finally:  # also when cancelled again while waiting
        _signal_group(process.pid, signal.SIGKILL)
    try:
        async with asyncio.timeout(1.0):
            await gone()
    except TimeoutError:
        pass


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, signum)


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class _Capture(asyncio.Protocol):
    """Keeps the first and the last ``cap // 2`` bytes of a pipe, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.half = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped <= 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… {dropped} bytes of output omitted …]\n{tail}"
