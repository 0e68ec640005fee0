"""The workdir jail: nothing outside the workdir is ever read, written or listed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ostinato.errors import ToolError
from ostinato.tools import files as files_module
from ostinato.tools import workdir as workdir_module
from ostinato.tools.base import ToolContext
from ostinato.tools.files import WriteMode, list_files, read_file, write_file
from ostinato.tools.workdir import Jail, workdir_for

SECRET = "the server's secret\n"
MODES: tuple[WriteMode, ...] = ("overwrite", "append", "create")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


@pytest.fixture
def work(tmp_path: Path, outside: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "inside.txt").write_text("inside\n")
    return folder


def context(workdir: Path | None) -> ToolContext:
    return ToolContext("conv", "turn", "run", "call", workdir=workdir)


def untouched(outside: Path) -> None:
    """The outside folder holds exactly what the fixture put there."""
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET


def test_no_workdir_is_an_error_the_model_sees() -> None:
    with pytest.raises(ToolError, match="no workdir is configured"):
        read_file(context(None), "a.txt")
    with pytest.raises(ToolError, match="no workdir is configured"):
        write_file(context(None), "a.txt", "x")
    with pytest.raises(ToolError, match="no workdir is configured"):
        list_files(context(None))


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "sub/../../outside/secret.txt", "..", "sub/deeper/../../.."],
)
def test_dot_dot_may_not_leave_the_workdir(work: Path, outside: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the workdir"):
        read_file(context(work), path)
    with pytest.raises(ToolError, match="outside the workdir"):
        write_file(context(work), path, "overwritten")
    with pytest.raises(ToolError, match="outside the workdir"):
        list_files(context(work), path)
    untouched(outside)


def test_overlong_paths_are_refused(work: Path) -> None:
    with pytest.raises(ToolError, match="longer than"):
        write_file(context(work), "a/" * 3000 + "f.txt", "x")
    assert not (work / "a").exists()


def test_dot_dot_that_stays_inside_is_fine(work: Path) -> None:
    assert read_file(context(work), "sub/deeper/../inside.txt") == "inside\n"


@pytest.mark.parametrize("absolute", ["/etc/passwd", "{outside}/secret.txt", "{work}/sub/x"])
def test_absolute_paths_are_refused(work: Path, outside: Path, absolute: str) -> None:
    path = absolute.format(outside=outside, work=work)
    with pytest.raises(ToolError, match="not relative to the workdir"):
        read_file(context(work), path)
    with pytest.raises(ToolError, match="not relative to the workdir"):
        write_file(context(work), path, "x")
    untouched(outside)


def test_nul_bytes_are_refused(work: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        read_file(context(work), "sub/inside.txt\0.png")
    with pytest.raises(ToolError, match="NUL"):
        write_file(context(work), "a\0b", "x")


@pytest.mark.parametrize("relative", [False, True])
def test_a_symlinked_file_pointing_out_is_refused(
    work: Path, outside: Path, relative: bool
) -> None:
    target = "../outside/secret.txt" if relative else str(outside / "secret.txt")
    (work / "link.txt").symlink_to(target)
    with pytest.raises(ToolError, match=r"outside the workdir"):
        read_file(context(work), "link.txt")
    for mode in MODES:
        with pytest.raises(ToolError, match="outside the workdir"):
            write_file(context(work), "link.txt", "overwritten", mode)
    untouched(outside)


def test_a_symlinked_directory_pointing_out_is_refused(work: Path, outside: Path) -> None:
    (work / "out").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workdir"):
        read_file(context(work), "out/secret.txt")
    with pytest.raises(ToolError, match="outside the workdir"):
        write_file(context(work), "out/new.txt", "x")
    with pytest.raises(ToolError, match="outside the workdir"):
        write_file(context(work), "out/made/new.txt", "x")
    with pytest.raises(ToolError, match="outside the workdir"):
        list_files(context(work), "out")
    untouched(outside)


def test_a_symlink_in_an_intermediate_component_is_refused(work: Path, outside: Path) -> None:
    (outside / "nested").mkdir()
    (outside / "nested" / "deep.txt").write_text("deep\n")
    (work / "sub" / "deeper" / "hop").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workdir"):
        read_file(context(work), "sub/deeper/hop/nested/deep.txt")
    with pytest.raises(ToolError, match="outside the workdir"):
        write_file(context(work), "sub/deeper/hop/nested/deep.txt", "x")
    assert (outside / "nested" / "deep.txt").read_text() == "deep\n"


def test_a_symlink_that_climbs_out_through_dot_dot_is_refused(work: Path, outside: Path) -> None:
    (work / "sub" / "up").symlink_to("../..")
    with pytest.raises(ToolError, match="outside the workdir"):
        read_file(context(work), "sub/up/outside/secret.txt")


def test_symlinks_that_stay_inside_are_followed(work: Path) -> None:
    (work / "rel").symlink_to("sub/inside.txt")
    (work / "abs").symlink_to(work / "sub" / "inside.txt")
    (work / "sub" / "deeper" / "back").symlink_to("..")
    assert read_file(context(work), "rel") == "inside\n"
    assert read_file(context(work), "abs") == "inside\n"
    assert read_file(context(work), "sub/deeper/back/inside.txt") == "inside\n"
    write_file(context(work), "rel", "changed\n")
    assert (work / "sub" / "inside.txt").read_text() == "changed\n"
    assert (work / "rel").is_symlink()


def test_symlink_loops_end(work: Path) -> None:
    (work / "a").symlink_to("b")
    (work / "b").symlink_to("a")
    with pytest.raises(ToolError, match="too many levels of symbolic links"):
        read_file(context(work), "a")


def swap_after_check(monkeypatch: pytest.MonkeyPatch, victim: Path, target: Path) -> None:
    """Replace ``victim`` with a symlink to ``target`` right after the jail checked it.

    This is the race a check-then-open jail loses: the component was a plain file or
    directory when looked at, and is a symlink pointing out when used.
    """
    real = workdir_module._readlink

    def checked_then_swapped(name: str, dir_fd: int, shown: str) -> str | None:
        found = real(name, dir_fd, shown)
        if name == victim.name and not victim.is_symlink():
            victim.rename(victim.with_name(victim.name + ".moved"))
            victim.symlink_to(target)
        return found

    monkeypatch.setattr(workdir_module, "_readlink", checked_then_swapped)


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_read(
    work: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    swap_after_check(monkeypatch, work / "sub" / "inside.txt", outside / "secret.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        read_file(context(work), "sub/inside.txt")


@pytest.mark.parametrize("mode", ["append", "create"])
def test_a_file_swapped_for_a_symlink_after_the_check_is_not_written(
    work: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    swap_after_check(monkeypatch, work / "sub" / "inside.txt", outside / "secret.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        write_file(context(work), "sub/inside.txt", "overwritten", mode)  # type: ignore[arg-type]
    untouched(outside)


def test_overwriting_never_writes_through_a_symlink_swapped_in_before_the_rename(
    work: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last window: the temporary file is written, then the name becomes a symlink.

    The rename replaces the link itself; its target is not touched.
    """
    victim = work / "sub" / "inside.txt"
    real = files_module._write_all

    def write_then_swap(fd: int, data: bytes, *, sync: bool = False) -> None:
        real(fd, data, sync=sync)
        victim.unlink()
        victim.symlink_to(outside / "secret.txt")

    monkeypatch.setattr(files_module, "_write_all", write_then_swap)
    write_file(context(work), "sub/inside.txt", "overwritten")
    untouched(outside)
    assert not victim.is_symlink()
    assert victim.read_text() == "overwritten"


@pytest.mark.parametrize("operation", ["read", "write", "list"])
def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_entered(
    work: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    (outside / "inside.txt").write_text("outside copy\n")
    swap_after_check(monkeypatch, work / "sub", outside)
    with pytest.raises(ToolError, match="not a directory"):
        if operation == "read":
            read_file(context(work), "sub/inside.txt")
        elif operation == "write":
            write_file(context(work), "sub/inside.txt", "overwritten")
        else:
            list_files(context(work), "sub/deeper")
    untouched_copy = (outside / "inside.txt").read_text()
    assert untouched_copy == "outside copy\n"
    assert sorted(p.name for p in outside.iterdir()) == ["inside.txt", "secret.txt"]


def test_o_nofollow_refuses_a_symlink_even_unchecked(work: Path, outside: Path) -> None:
    """The last line of defence, shown directly: the open itself will not follow."""
    (work / "link").symlink_to(outside / "secret.txt")
    with Jail(work) as jail, pytest.raises(OSError):
        os.open("link", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=jail.root_fd)


def test_fifos_are_neither_read_nor_written_and_nothing_blocks(work: Path) -> None:
    os.mkfifo(work / "pipe")
    with pytest.raises(ToolError, match="FIFO"):
        read_file(context(work), "pipe")
    for mode in MODES:
        with pytest.raises(ToolError):
            write_file(context(work), "pipe", "x", mode)
    assert stat.S_ISFIFO(os.stat(work / "pipe", follow_symlinks=False).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_device_files_are_not_read(work: Path) -> None:
    os.mknod(work / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    with pytest.raises(ToolError, match="device"):
        read_file(context(work), "zero")


def test_appending_to_a_hard_link_is_refused(work: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", work / "hard.txt")
    with pytest.raises(ToolError, match="hard-linked"):
        write_file(context(work), "hard.txt", "more", "append")
    write_file(context(work), "hard.txt", "replaced")  # a new file; the link is broken
    untouched(outside)


def test_workdir_for_makes_a_private_folder_per_conversation(tmp_path: Path) -> None:
    first = workdir_for(tmp_path / "data", "0193abc")
    assert first == tmp_path / "data" / "workdirs" / "0193abc"
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o700
    (first / "kept.txt").write_text("kept")
    assert workdir_for(tmp_path / "data", "0193abc") == first
    assert (first / "kept.txt").read_text() == "kept"
    assert workdir_for(tmp_path / "data", "other") != first


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "/abs", "a\0b", "x..y", "-x"])
def test_workdir_for_refuses_ids_that_name_other_folders(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        workdir_for(tmp_path, bad)


def test_workdir_for_refuses_a_symlink_in_place_of_the_folder(
    tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "data" / "workdirs").mkdir(parents=True)
    (tmp_path / "data" / "workdirs" / "conv").symlink_to(outside)
    with pytest.raises(ValueError):
        workdir_for(tmp_path / "data", "conv")
