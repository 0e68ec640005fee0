"""A conversation's workdir, and the jail that keeps file tools inside it.

Every conversation has a folder of its own, by default ``<data_dir>/workdirs/<id>``,
made on first use and readable by the server's user only. ``Jail`` resolves a path the
model gives beneath that folder one component at a time: each directory is opened with
``O_NOFOLLOW`` relative to the one before it, ``..`` walks back up the directories already
opened (never above the workdir), and a symbolic link is read and followed by this code,
not by the kernel, and only while it stays inside. A symlink swapped in between a check
and a use makes the ``O_NOFOLLOW`` open fail, so nothing outside is ever reached.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ostinato.errors import ToolError

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_SYMLINKS = 40  # as the kernel's own limit for one path
MAX_PATH = 4096  # characters, as PATH_MAX

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def workdir_for(data_dir: Path | str, conversation_id: str) -> Path:
    """The conversation's workdir, ``<data_dir>/workdirs/<conversation_id>``, made 0700.

    Raises ``ValueError`` for an id that could name another folder (``/``, ``..``).
    """
    if not _CONVERSATION_ID.fullmatch(conversation_id) or ".." in conversation_id:
        raise ValueError(f"not a usable conversation id for a workdir: {conversation_id!r}")
    parent = Path(data_dir) / "workdirs"
    workdir = parent / conversation_id
    with suppress(OSError):  # made before: one lstat, not two mkdirs and a raise
        if stat.S_ISDIR(os.lstat(workdir).st_mode):
            return workdir
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        workdir.mkdir(mode=0o700)
    except FileExistsError:
        if workdir.is_symlink() or not workdir.is_dir():
            raise ValueError(f"{workdir} exists and is not a directory") from None
    else:
        os.chmod(workdir, 0o700)  # whatever the umask said
    return workdir


@dataclass(slots=True)
class Location:
    """Where a path ends: the open directory holding it and the final name in it.

    ``name`` is None when the path names a directory walked to (``.``, ``a/..``); then
    ``dir_fd`` is that directory. ``name`` is never a symbolic link when it was checked,
    so opening it with ``O_NOFOLLOW`` either opens what was checked or fails.
    """

    dir_fd: int
    name: str | None
    relpath: str  # the resolved path relative to the workdir, for messages


class Jail:
    """The workdir opened as a directory; paths are resolved beneath it only.

    Use as a context manager: ``with Jail(context.workdir) as jail: ...``.
    """

    def __init__(self, workdir: Path | None) -> None:
        if workdir is None:
            raise ToolError("no workdir is configured for this conversation")
        self.root = Path(workdir)
        try:
            self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolError(f"the workdir cannot be opened: {exc.strerror}") from None
        self._prefixes = {str(self.root), os.path.realpath(self.root)}

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def __enter__(self) -> Jail:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def locate(self, path: str, *, make_parents: bool = False) -> Iterator[Location]:
        """Resolve ``path`` beneath the workdir; the directories opened close on exit.

        With ``make_parents`` missing directories on the way are created (each made with
        ``mkdirat`` and then opened with ``O_NOFOLLOW``, so a swap cannot redirect it).
        """
        stack: list[tuple[int, str]] = []
        try:
            yield self._walk(path, stack, make_parents)
        finally:
            for fd, _ in stack:
                os.close(fd)

    @contextmanager
    def open_directory(self, path: str) -> Iterator[tuple[int, str]]:
        """An fd of the directory ``path`` names, and its resolved relative path."""
        with self.locate(path) as where:
            if where.name is None:
                yield where.dir_fd, where.relpath
                return
            try:
                fd = os.open(where.name, DIRECTORY_FLAGS, dir_fd=where.dir_fd)
            except OSError as exc:
                raise refusal(where.relpath, exc) from None
            try:
                yield fd, where.relpath
            finally:
                os.close(fd)

    def _walk(self, path: str, stack: list[tuple[int, str]], make_parents: bool) -> Location:
        pending = deque(split_relative(path))
        hops = 0
        while pending:
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    raise ToolError(f"{path!r} leads outside the workdir")
                os.close(stack.pop()[0])
                continue
            here = stack[-1][0] if stack else self.root_fd
            shown = _join([name for _, name in stack] + [part])
            target = _readlink(part, here, shown)
            if target is None:
                if not pending or all(p in ("", ".") for p in pending):
                    return Location(here, part, shown)
                stack.append((self._enter(part, here, shown, make_parents), part))
                continue
            hops += 1
            if hops > MAX_SYMLINKS:
                raise ToolError(f"{path!r}: too many levels of symbolic links")
            pending.extendleft(reversed(self._link_parts(target, shown, stack)))
        here = stack[-1][0] if stack else self.root_fd
        return Location(here, None, _join([name for _, name in stack]))

    def _enter(self, part: str, here: int, shown: str, make_parents: bool) -> int:
        """Open the directory ``part`` in ``here`` (made first if missing and allowed)."""
        try:
            return os.open(part, DIRECTORY_FLAGS, dir_fd=here)
        except FileNotFoundError:
            if not make_parents:
                raise ToolError(f"no such directory: {shown!r}") from None
        except OSError as exc:
            raise refusal(shown, exc) from None
        try:
            with suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=here)
            return os.open(part, DIRECTORY_FLAGS, dir_fd=here)
        except OSError as exc:
            raise refusal(shown, exc) from None

    def _link_parts(self, target: str, shown: str, stack: list[tuple[int, str]]) -> list[str]:
        """The components a symlink stands for; an absolute target must lie inside."""
        if "\0" in target:
            raise ToolError(f"{shown!r} is a symbolic link with an unusable target")
        if not target.startswith("/"):
            return target.split("/")
        for prefix in self._prefixes:
            if target == prefix or target.startswith(prefix.rstrip("/") + "/"):
                while stack:
                    os.close(stack.pop()[0])
                return target[len(prefix) :].split("/")
        raise ToolError(f"{shown!r} is a symbolic link pointing outside the workdir")


def split_relative(path: str) -> list[str]:
    """The components of a path the model gave; absolute paths and NUL are refused."""
    if not isinstance(path, str) or "\0" in path:
        raise ToolError("a path must be text without NUL characters")
    if len(path) > MAX_PATH:
        raise ToolError(f"the path is longer than {MAX_PATH} characters")
    if path.startswith("/") or path == "~" or path.startswith("~/"):
        raise ToolError(
            f"{path!r} is not relative to the workdir; give a path such as 'src/main.py'"
        )
    return path.split("/")


def refusal(shown: str, exc: OSError) -> ToolError:
    """The sentence for an ``OSError`` met while resolving or opening ``shown``."""
    if exc.errno == errno.ELOOP:
        return ToolError(f"{shown!r} is a symbolic link (changed while it was being opened)")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{shown!r} is not a directory")
    if exc.errno == errno.ENOENT:
        return ToolError(f"no such file or directory: {shown!r}")
    if exc.errno == errno.EISDIR:
        return ToolError(f"{shown!r} is a directory")
    return ToolError(f"{shown!r}: {exc.strerror or exc}")


def describe_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _readlink(name: str, dir_fd: int, shown: str) -> str | None:
    """The target if ``name`` is a symbolic link; None if it is anything else or absent."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise refusal(shown, exc) from None


def _join(names: list[str]) -> str:
    return "/".join(names) or "."
