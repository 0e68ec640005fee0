"""read_file, write_file and list_files: paging, caps, atomic overwrite, listing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ostinato.errors import ToolError
from ostinato.tools import files as files_module
from ostinato.tools.base import Tool, ToolContext
from ostinato.tools.files import (
    MAX_LIST_ENTRIES,
    MAX_READ_BYTES,
    MAX_WRITE_BYTES,
    list_files,
    read_file,
    write_file,
)
from ostinato.tools.system import workdir_tools


def context(workdir: Path) -> ToolContext:
    return ToolContext("conv", "turn", "run", "call", workdir=workdir)


# --- read_file ----------------------------------------------------------------------------


def test_reads_a_whole_small_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    assert read_file(context(tmp_path), "a.txt") == "one\ntwo\n"


def test_pages_by_lines(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    first = read_file(context(tmp_path), "a.txt", limit=4)
    assert first.startswith("line 1\nline 2\nline 3\nline 4\n[lines 1-4 shown;")
    assert "offset=4" in first
    middle = read_file(context(tmp_path), "a.txt", offset=4, limit=4)
    assert middle.startswith("line 5\n") and "offset=8" in middle
    last = read_file(context(tmp_path), "a.txt", offset=8, limit=4)
    assert last == "line 9\nline 10\n[lines 9-10 of 10]"
    beyond = read_file(context(tmp_path), "a.txt", offset=50)
    assert beyond == "[no lines after offset 50: the file has 10 lines]"


def test_a_large_file_is_paged_under_the_byte_cap_and_pages_add_up(tmp_path: Path) -> None:
    lines = [f"{i:06d} " + "x" * 93 + "\n" for i in range(8000)]  # 100 bytes each: 800 KB
    (tmp_path / "big.txt").write_text("".join(lines))
    offset, pages, seen = 0, 0, []
    while True:
        page = read_file(context(tmp_path), "big.txt", offset=offset, limit=100_000)
        cut = page.rindex("\n[") + 1
        body, note = page[:cut], page[cut:]
        assert len(body.encode()) <= MAX_READ_BYTES
        seen.extend(body.splitlines(keepends=True))
        pages += 1
        if "more follow" not in note:
            break
        offset = int(note.rsplit("offset=", 1)[1].rstrip("]"))
    assert pages == 4
    assert seen == lines


def test_a_line_longer_than_the_cap_is_cut_and_paging_moves_past_it(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_bytes(b"y" * (MAX_READ_BYTES * 3) + b"\nnext\n")
    first = read_file(context(tmp_path), "wide.txt")
    assert first.startswith("y" * 1000)
    assert f"[line cut at {MAX_READ_BYTES} bytes]" in first
    assert "offset=1" in first
    assert read_file(context(tmp_path), "wide.txt", offset=1) == "next\n[lines 2-2 of 2]"


def test_empty_binary_missing_and_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    (tmp_path / "dir").mkdir()
    assert read_file(context(tmp_path), "empty") == "[the file is empty]"
    with pytest.raises(ToolError, match="looks binary"):
        read_file(context(tmp_path), "blob.bin")
    with pytest.raises(ToolError, match="no such file"):
        read_file(context(tmp_path), "missing.txt")
    with pytest.raises(ToolError, match="no such directory"):
        read_file(context(tmp_path), "nowhere/missing.txt")
    with pytest.raises(ToolError, match="is a directory"):
        read_file(context(tmp_path), "dir")
    with pytest.raises(ToolError, match="offset"):
        read_file(context(tmp_path), "empty", offset=-1)


def test_invalid_utf8_is_shown_with_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert read_file(context(tmp_path), "latin1.txt") == "caf\ufffd\n"


# --- write_file ---------------------------------------------------------------------------


def test_writes_a_new_file_and_its_parent_directories(tmp_path: Path) -> None:
    said = write_file(context(tmp_path), "a/b/c/notes.md", "# notes\n")
    assert said == "wrote 8 bytes to a/b/c/notes.md"
    assert (tmp_path / "a" / "b" / "c" / "notes.md").read_text() == "# notes\n"


def test_overwrite_replaces_the_file_at_once_and_keeps_its_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    before = script.stat().st_ino
    write_file(context(tmp_path), "run.sh", "echo new\n")
    assert script.read_text() == "echo new\n"
    assert script.stat().st_ino != before  # a new file renamed into place, not rewritten
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # no temporary left


def test_a_failed_overwrite_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "keep.txt").write_text("old content\n")

    def disk_full(fd: int, data: bytes, *, sync: bool = False) -> None:
        os.write(fd, data[:3])
        os.close(fd)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files_module, "_write_all", disk_full)
    with pytest.raises(ToolError, match="No space left"):
        write_file(context(tmp_path), "keep.txt", "new content\n")
    assert (tmp_path / "keep.txt").read_text() == "old content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_append_and_create_only(tmp_path: Path) -> None:
    assert write_file(context(tmp_path), "log.txt", "one\n", "append").endswith("(now 4 bytes)")
    write_file(context(tmp_path), "log.txt", "two\n", "append")
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\n"
    assert (
        write_file(context(tmp_path), "new.txt", "fresh", "create") == "created new.txt (5 bytes)"
    )
    with pytest.raises(ToolError, match="already exists"):
        write_file(context(tmp_path), "new.txt", "again", "create")
    assert (tmp_path / "new.txt").read_text() == "fresh"


def test_write_size_cap_and_directories(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="write at most"):
        write_file(context(tmp_path), "huge.txt", "x" * (MAX_WRITE_BYTES + 1))
    assert not (tmp_path / "huge.txt").exists()
    write_file(context(tmp_path), "full.txt", "x" * MAX_WRITE_BYTES)
    (tmp_path / "dir").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        write_file(context(tmp_path), "dir", "x")
    with pytest.raises(ToolError, match="is a directory"):
        write_file(context(tmp_path), ".", "x")
    with pytest.raises(ToolError, match="not a directory"):
        write_file(context(tmp_path), "full.txt/inner.txt", "x")


# --- list_files ---------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg" / "deep" / "deeper").mkdir(parents=True)
    (tmp_path / "README.md").write_text("hello")
    (tmp_path / "src" / "main.py").write_text("print()\n")
    (tmp_path / "src" / "pkg" / "deep" / "deeper" / "bottom.txt").write_text("")
    (tmp_path / "link").symlink_to("src")
    return tmp_path


def test_lists_one_level(tree: Path) -> None:
    assert list_files(context(tree)) == "README.md  5 bytes\nlink -> src\nsrc/"
    assert list_files(context(tree), "src") == "src/main.py  8 bytes\nsrc/pkg/"


def test_lists_recursively_breadth_first_without_following_symlinks(tree: Path) -> None:
    assert list_files(context(tree), recursive=True, max_depth=10).splitlines() == [
        "README.md  5 bytes",
        "link -> src",
        "src/",
        "src/main.py  8 bytes",
        "src/pkg/",
        "src/pkg/deep/",
        "src/pkg/deep/deeper/",
        "src/pkg/deep/deeper/bottom.txt  0 bytes",
    ]


def test_recursion_stops_at_the_depth_cap(tree: Path) -> None:
    listed = list_files(context(tree), recursive=True, max_depth=2).splitlines()
    assert "src/pkg/" in listed
    assert "src/pkg/deep/" not in listed
    assert listed[-1] == "[directories deeper than 2 levels are not listed]"
    with pytest.raises(ToolError, match="max_depth"):
        list_files(context(tree), recursive=True, max_depth=11)


def test_listing_stops_at_the_entry_cap(tmp_path: Path) -> None:
    for i in range(MAX_LIST_ENTRIES + 50):
        (tmp_path / f"f{i:05d}").touch()
    listed = list_files(context(tmp_path)).splitlines()
    assert len(listed) == MAX_LIST_ENTRIES + 1
    assert listed[-1].startswith(f"[stopped at {MAX_LIST_ENTRIES} entries")


def test_listing_an_empty_directory_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").touch()
    assert list_files(context(tmp_path), "empty") == "[the directory is empty]"
    with pytest.raises(ToolError, match="not a directory"):
        list_files(context(tmp_path), "file.txt")


# --- the tools as the loop sees them ------------------------------------------------------


def by_name() -> dict[str, Tool]:
    return {tool.name: tool for tool in workdir_tools()}


def test_the_tools_declare_their_risk_category_and_family() -> None:
    tools = by_name()
    assert sorted(tools) == ["list_files", "read_file", "shell", "write_file"]
    read, listing, write = tools["read_file"], tools["list_files"], tools["write_file"]
    assert (read.category, read.risk, read.idempotent) == ("read", "safe", True)
    assert (listing.category, listing.risk, listing.idempotent) == ("read", "safe", True)
    assert (write.category, write.risk, write.idempotent) == ("action", "write", False)
    assert read.family is not None and read.family({"path": "x"}) == "read_file"
    assert listing.family is not None and listing.family({}) == "list_files"
    assert write.family is None
    for tool in (read, listing, write):
        assert "context" not in tool.parameters["properties"]


async def test_the_tools_run_through_their_validated_arguments(tmp_path: Path) -> None:
    tools = by_name()
    write = tools["write_file"]
    arguments = write.validate({"path": "n.txt", "content": "hi\n", "mode": "append"})
    assert (
        await write.run(arguments, context(tmp_path)) == "appended 3 bytes to n.txt (now 3 bytes)"
    )
    read = tools["read_file"]
    assert await read.run(read.validate({"path": "n.txt"}), context(tmp_path)) == "hi\n"
    with pytest.raises(ToolError):
        write.validate({"path": "n.txt", "content": "x", "mode": "truncate"})
