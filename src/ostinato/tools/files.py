"""``read_file``, ``write_file`` and ``list_files``: text files in the workdir, jailed.

Every path goes through ``Jail`` (see ``ostinato.tools.workdir``); every file is opened
with ``O_NOFOLLOW`` beneath a directory fd, and only regular files are read or written.
The functions are synchronous: ``function_tool`` runs them in a worker thread.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import suppress
from typing import BinaryIO, Literal

from ostinato.errors import ToolError
from ostinato.tools.base import ToolContext
from ostinato.tools.workdir import DIRECTORY_FLAGS, Jail, describe_kind, refusal

MAX_READ_BYTES = 256 * 1024  # of text returned by one read_file call
DEFAULT_READ_LINES = 2000
MAX_WRITE_BYTES = 1024 * 1024  # of content in one write_file call
MAX_LIST_ENTRIES = 1000
DEFAULT_LIST_DEPTH = 3
MAX_LIST_DEPTH = 10

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = (
    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
)
_SNIFF_BYTES = 8192


def read_file(
    context: ToolContext, path: str, offset: int = 0, limit: int = DEFAULT_READ_LINES
) -> str:
    """Read a text file in the workdir, a page of lines at a time.

    Args:
        path: The file, relative to the workdir (e.g. "src/main.py").
        offset: How many lines to skip first; use the offset a previous call suggested
            to read the next page.
        limit: At most this many lines (a page also stops at 256 KiB of text).
    """
    if offset < 0 or limit < 1:
        raise ToolError("offset must be 0 or more and limit 1 or more")
    with Jail(context.workdir) as jail, jail.locate(path) as where:
        if where.name is None:
            raise ToolError(f"{where.relpath!r} is a directory; use list_files")
        try:
            fd = os.open(where.name, _READ_FLAGS, dir_fd=where.dir_fd)
        except OSError as exc:
            raise refusal(where.relpath, exc) from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise ToolError(f"{where.relpath!r} is {describe_kind(mode)}; only files are read")
        with os.fdopen(fd, "rb") as file:
            head = file.read(_SNIFF_BYTES)
            if b"\0" in head:
                size = os.fstat(fd).st_size
                raise ToolError(f"{where.relpath!r} looks binary ({size} bytes); not shown")
            file.seek(0)
            return _page(file, offset, limit)


def _page(file: BinaryIO, offset: int, limit: int) -> str:
    shown: list[str] = []
    size = 0
    seen = 0
    more = False
    for index, (raw, cut) in enumerate(_lines(file, MAX_READ_BYTES)):
        seen = index + 1
        if index < offset:
            continue
        if len(shown) >= limit or (shown and size + len(raw) > MAX_READ_BYTES):
            more = True
            seen = index
            break
        size += len(raw)
        text = raw.decode("utf-8", errors="replace")
        shown.append(f"{text}… [line cut at {len(raw)} bytes]\n" if cut else text)
    if seen == 0:
        return "[the file is empty]"
    if not shown:
        return f"[no lines after offset {offset}: the file has {seen} lines]"
    body = "".join(shown)
    first, last = offset + 1, offset + len(shown)
    if more:
        note = f"[lines {first}-{last} shown; more follow: read again with offset={last}]"
    elif offset:
        note = f"[lines {first}-{last} of {last}]"
    else:
        return body
    return body + ("" if body.endswith("\n") else "\n") + note


def _lines(file: BinaryIO, keep: int) -> Iterator[tuple[bytes, bool]]:
    """Each line with its newline, cut to ``keep`` bytes, and whether it was cut.

    Memory stays bounded whatever the file holds (a one-line gigabyte is fine).
    """
    line = bytearray()
    cut = False
    while chunk := file.read(64 * 1024):
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end + 1
            room = keep - len(line)
            if stop - start > room:
                line += chunk[start : start + room]
                cut = True
            else:
                line += chunk[start:stop]
            start = stop
            if end >= 0:
                yield bytes(line), cut
                line.clear()
                cut = False
    if line or cut:
        yield bytes(line), cut


WriteMode = Literal["overwrite", "append", "create"]


def write_file(context: ToolContext, path: str, content: str, mode: WriteMode = "overwrite") -> str:
    """Write a text file in the workdir; missing parent directories are created.

    Args:
        path: The file, relative to the workdir (e.g. "notes/todo.md").
        content: The text to write (UTF-8, at most 1 MiB).
        mode: "overwrite" replaces the whole file at once (readers never see half a
            file), "append" adds to its end, "create" fails if the file exists.
    """
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(f"the content is {len(data)} bytes; write at most {MAX_WRITE_BYTES}")
    with Jail(context.workdir) as jail, jail.locate(path, make_parents=True) as where:
        if where.name is None:
            raise ToolError(f"{where.relpath!r} is a directory")
        try:
            existing = os.stat(where.name, dir_fd=where.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            raise refusal(where.relpath, exc) from None
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            kind = describe_kind(existing.st_mode)
            raise ToolError(f"{where.relpath!r} is {kind}; only files are written")
        try:
            if mode == "append":
                total = _append(where.dir_fd, where.name, data, where.relpath)
                return f"appended {len(data)} bytes to {where.relpath} (now {total} bytes)"
            if mode == "create":
                _write_all(os.open(where.name, _CREATE_FLAGS, 0o666, dir_fd=where.dir_fd), data)
                return f"created {where.relpath} ({len(data)} bytes)"
            keep = None if existing is None else stat.S_IMODE(existing.st_mode)
            _replace(where.dir_fd, where.name, data, keep)
        except FileExistsError:
            raise ToolError(f"{where.relpath!r} already exists (mode 'create')") from None
        except OSError as exc:
            raise refusal(where.relpath, exc) from None
        return f"wrote {len(data)} bytes to {where.relpath}"


def _append(dir_fd: int, name: str, data: bytes, shown: str) -> int:
    fd = os.open(name, _APPEND_FLAGS, 0o666, dir_fd=dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        why = describe_kind(info.st_mode) if not stat.S_ISREG(info.st_mode) else "hard-linked"
        raise ToolError(f"{shown!r} is {why}; not appended to")
    _write_all(fd, data)
    return info.st_size + len(data)


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Write a temporary file beside ``name``, then rename it over ``name`` at once."""
    temporary = f".ostinato-{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, _CREATE_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        _write_all(fd, data, sync=True)
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise


def _write_all(fd: int, data: bytes, *, sync: bool = False) -> None:
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        if sync:
            os.fsync(fd)


def list_files(
    context: ToolContext,
    path: str = ".",
    recursive: bool = False,
    max_depth: int = DEFAULT_LIST_DEPTH,
) -> str:
    """List a directory in the workdir: "name/" for directories, files with their size.

    Args:
        path: The directory, relative to the workdir ("." is the workdir itself).
        recursive: Also list subdirectories, breadth first.
        max_depth: With recursive, how many levels deep to go (1 to 10).
    """
    if not 1 <= max_depth <= MAX_LIST_DEPTH:
        raise ToolError(f"max_depth must be between 1 and {MAX_LIST_DEPTH}")
    depth_limit = max_depth if recursive else 1
    with Jail(context.workdir) as jail, jail.open_directory(path) as (top_fd, top):
        listing = _Listing(top_fd, "" if top == "." else f"{top}/")
        queue: deque[tuple[list[str], int]] = deque([([], 1)])
        while queue and not listing.full:
            names, depth = queue.popleft()
            for subdirectory in listing.add(names):
                if depth < depth_limit:
                    queue.append((subdirectory, depth + 1))
                else:
                    listing.deeper = recursive
        return listing.render(depth_limit)


class _Listing:
    """The lines of a listing, made one directory at a time (breadth first)."""

    def __init__(self, top_fd: int, top: str) -> None:
        self.top_fd = top_fd
        self.top = top  # entries are shown relative to the workdir
        self.lines: list[str] = []
        self.notes: list[str] = []
        self.deeper = False  # some directory was left out by the depth limit

    @property
    def full(self) -> bool:
        return len(self.lines) >= MAX_LIST_ENTRIES

    def add(self, names: list[str]) -> Iterator[list[str]]:
        """List the directory ``names`` (beneath the top); yield its subdirectories."""
        prefix = self.top + "".join(f"{n}/" for n in names)
        try:
            fd = _open_beneath(self.top_fd, names)
        except OSError:
            self.notes.append(f"[{prefix} could not be listed: it changed meanwhile]")
            return
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda e: e.name)
            for entry in entries:
                if self.full:
                    return
                shown = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    self.lines.append(f"{shown}/")
                    yield [*names, entry.name]
                elif stat.S_ISLNK(info.st_mode):
                    self.lines.append(f"{shown} -> {os.readlink(entry.name, dir_fd=fd)}")
                elif stat.S_ISREG(info.st_mode):
                    self.lines.append(f"{shown}  {info.st_size} bytes")
                else:
                    self.lines.append(f"{shown}  ({describe_kind(info.st_mode)})")
        finally:
            os.close(fd)

    def render(self, depth_limit: int) -> str:
        lines = self.lines[:MAX_LIST_ENTRIES] + self.notes
        if self.full:
            lines.append(f"[stopped at {MAX_LIST_ENTRIES} entries; list a subdirectory]")
        elif self.deeper:
            lines.append(f"[directories deeper than {depth_limit} levels are not listed]")
        return "\n".join(lines) if lines else "[the directory is empty]"


def _open_beneath(top_fd: int, names: list[str]) -> int:
    """Open ``top_fd``/names one directory at a time, never through a symlink."""
    fd = os.dup(top_fd)
    for name in names:
        try:
            inner = os.open(name, DIRECTORY_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd
