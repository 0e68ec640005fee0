"""The tools that work in a conversation's workdir: files and the shell.

They are the tools that need consent most: ``write_file`` (risk ``write``) and
``shell`` (risk ``exec``) change things; ``read_file`` and ``list_files`` only look.
"""

from __future__ import annotations

from collections.abc import Callable

from ostinato.messages import JSON
from ostinato.tools.base import Tool
from ostinato.tools.files import list_files, read_file, write_file
from ostinato.tools.functions import function_tool
from ostinato.tools.shell import KILL_GRACE, MAX_TIMEOUT, shell, shell_family


def workdir_tools() -> list[Tool]:
    """``read_file``, ``list_files``, ``write_file`` and ``shell``, jailed to the workdir."""
    return [
        function_tool(
            read_file, category="read", risk="safe", family=_named("read_file"), untrusted=True
        ),
        function_tool(list_files, category="read", risk="safe", family=_named("list_files")),
        # No family: a grant for it would cover every write in the workdir. Append mode
        # is not idempotent, so neither is the tool.
        function_tool(write_file, category="action", risk="write", idempotent=False),
        function_tool(
            shell,
            category="action",
            risk="exec",
            idempotent=False,
            # The command's own deadline (at most MAX_TIMEOUT) and the kill grace come
            # first; the loop's deadline is only the outer bound.
            timeout=MAX_TIMEOUT + KILL_GRACE + 30.0,
            family=shell_family,
            untrusted=True,  # what a command prints can come from anywhere
        ),
    ]


def _named(name: str) -> Callable[[JSON], str | None]:
    def family(arguments: JSON) -> str | None:
        return name

    return family
