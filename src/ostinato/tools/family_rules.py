"""Per-program rules for shell families: which invocations a family grant may cover. Data.

A family grant for ``git`` should cover ``git status`` and ``git log -5``, never
``git -c alias.x='!sh ...' x``. Each ``ProgramRule`` names the options and subcommands
with which a program runs other code, loads code, reads its configuration from the
command line, changes directory or writes outside the workdir; ``ostinato.tools.families``
applies them (and a generic rule for every program) in a fixed order.

What is listed here was worked out from each program's manual and from how other agents
judge "safe" commands (OpenAI Codex CLI's ``command_safety/is_safe_command.rs``: git
config overrides, ``--output``, ``--ext-diff``/``--textconv``, ``rg --pre``/
``--hostname-bin``/``-z``, ``find -fprint``; GTFOBins for the options of common programs
that run commands, such as ``tar --checkpoint-action`` and ``--to-command``). It is
written for this project, and is deliberately narrower than those allow-lists: when a
rule is unsure, the call is outside the family and asks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Check = Callable[[Sequence[str]], str | None]
"""A program's own test of its arguments: why the call is outside the family, or None."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class ProgramRule:
    """What puts one program's call outside its family.

    Option names are written without dashes: ``"c"`` is ``-c`` (alone or in a cluster
    such as ``-xc``), ``"output"`` is ``--output`` or ``--output=...``.
    """

    refuse: frozenset[str] = frozenset()  # options that run, load or configure code
    harmless: frozenset[str] = frozenset()  # generic option names this program uses safely
    single_dash_long: bool = False  # ``-name`` is one option (find, go), not a cluster
    generic: bool = True  # the generic option rule applies too
    subcommands: frozenset[str] | None = None  # the first word must be one of these
    before_subcommand: frozenset[str] | None = None  # the only options allowed before it
    outside: frozenset[str] = frozenset()  # subcommands (any plain word) never covered
    per_subcommand: Mapping[str, frozenset[str]] = field(default_factory=dict)
    check: Check | None = None
    # The words that are program text (sed scripts, awk programs), not paths: the
    # program's check judges them, the rule about paths outside the workdir does not.
    code: Callable[[Sequence[str]], list[str]] | None = None


# --- the generic rule: option shapes that are never covered, for any program -------------

GENERIC_SHORT = frozenset("coCe")
"""``-c`` (a command or a config), ``-o`` (an output file), ``-C`` (a directory),
``-e`` (code to evaluate), alone or in a cluster of letters."""

GENERIC_LONG_PREFIXES = (
    # configuration and code loaded from elsewhere
    *("config", "rcfile", "init-file", "env-file", "plugin", "load", "preload", "require"),
    *("import", "eval", "include", "file", "template", "hook", "python", "interpreter"),
    *("engine", "pre-", "registry", "index", "extra-index", "find-links", "trusted-host"),
    *("upload-pack", "receive-pack", "inspect"),
    # where it runs and where it writes
    *("output", "prefix", "directory", "dir", "chdir", "cwd", "workdir", "work-tree"),
    *("git-dir", "root", "log-file", "logfile"),
)
GENERIC_LONG_EXACT = frozenset({"pre", "log"})
GENERIC_LONG_CONTAINS = (
    *("command", "script", "program", "shell", "exec", "pager", "editor", "browser"),
    *("config", "output", "plugin", "hook", "loader"),
)
SWITCHED_OFF = ("no-", "ignore-", "disable-")
"""Long options that turn something off (``--no-pager``, ``--ignore-scripts``) are not
taken for the thing they turn off."""

# --- programs that run another command given as arguments: never a family --------------

WRAPPERS = _names(
    """
    sh bash dash zsh ksh mksh yash fish csh tcsh busybox
    env sudo doas su runuser pkexec chroot nsenter unshare setsid systemd-run ssh
    xargs parallel nohup timeout nice ionice chrt taskset stdbuf unbuffer script flock
    watch time strace ltrace command builtin exec eval source . ..
    npx pnpx bunx uvx docker podman kubectl at batch crontab tmux screen expect entr
    nodemon concurrently sqlite3 gdb valgrind vi vim nvim ex ed emacs firejail bwrap
    proot setarch numactl cgexec prlimit sg newgrp capsh faketime torsocks proxychains
    dbus-run-session xvfb-run fakeroot rlwrap
    """
)

# --- program checks (pure functions of the argument words) ------------------------------

_SED_SAFE_COMMANDS = frozenset("pPdDnN=lqQhHgGxzFv")
_SED_SAFE_FLAGS = re.compile(r"[gpiImM0-9]*")


def _delimited(text: str, start: int, delimiter: str) -> int:
    """The index of the next unescaped ``delimiter`` at or after ``start``, or -1."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == delimiter:
            return i
        i += 1
    return -1


def _sed_address(script: str, i: int) -> int:
    """Skip one address (``3``, ``$``, ``1~2``, ``+3``, ``/re/I``); -1 if it is malformed."""
    match = re.compile(r"\d+(~\d+)?|\$|[+~]\d+").match(script, i)
    if match:
        return match.end()
    if i < len(script) and script[i] == "/":
        end = _delimited(script, i + 1, "/")
        if end < 0:
            return -1
        i = end + 1
        while i < len(script) and script[i] in "IM":
            i += 1
    return i


def _sed_s(script: str, i: int, flags_allowed: bool) -> tuple[int, str | None]:
    """Skip an ``s`` or ``y`` command's body (two delimited parts, then ``s``'s flags)."""
    if i >= len(script) or script[i] in "\\ \n;":
        return i, "a sed s or y command without a delimiter"
    delimiter, at = script[i], i + 1
    for _ in range(2):
        end = _delimited(script, at, delimiter)
        if end < 0:
            return i, "an unterminated sed s or y command"
        at = end + 1
    flags = re.compile(r"[^;]*").match(script, at)
    assert flags is not None
    if flags_allowed and not _SED_SAFE_FLAGS.fullmatch(flags.group().strip()):
        return at, "a sed s flag that writes a file or runs a command (w, e)"
    if not flags_allowed and flags.group().strip():
        return at, "text after a sed y command"
    return flags.end(), None


def sed_script_problem(script: str) -> str | None:
    """Why a sed script may write a file or run a command, or None: every command is
    one of the safe ones (print, delete, next, quit, hold, ``s`` with safe flags, ``y``,
    text, labels). ``w``, ``W``, ``r``, ``R``, ``e``, blocks and anything unknown are
    outside."""
    i = 0
    while i < len(script):
        while i < len(script) and script[i] in " ;":
            i += 1
        if i >= len(script):
            return None
        i = _sed_address(script, i)
        if i >= 0 and i < len(script) and script[i] == ",":
            i = _sed_address(script, i + 1)
        if i < 0:
            return "a sed address that could not be read"
        i = len(script) - len(script[i:].lstrip(" !"))
        command = script[i : i + 1]
        if command in ("s", "y"):
            i, problem = _sed_s(script, i + 1, command == "s")
            if problem:
                return problem
        elif command in _SED_SAFE_COMMANDS or command in ("a", "i", "c", "b", "t", "T", ":"):
            end = script.find(";", i + 1)
            i = len(script) if end < 0 else end
        else:
            return f"the sed command {command!r} may read or write a file or run a command"
    return None


def _sed_scripts(args: Sequence[str]) -> list[str]:
    """The scripts of a sed call: each ``-e``/``--expression`` value (``-ne SCRIPT``,
    ``-eSCRIPT`` too), else the first plain word."""
    scripts: list[str] = []
    plain: list[str] = []
    explicit = expect = False
    for arg in args:
        if expect:
            scripts.append(arg)
            expect = False
        elif arg == "--expression" or arg.startswith("--expression="):
            explicit = True
            scripts += arg.split("=", 1)[1:]
            expect = "=" not in arg
        elif re.match(r"-[A-Za-z]*e", arg):
            explicit = True
            glued = arg[arg.index("e") + 1 :]
            scripts += [glued] if glued else []
            expect = not glued
        elif not arg.startswith("-"):
            plain.append(arg)
    return scripts if explicit else plain[:1]


def _sed(args: Sequence[str]) -> str | None:
    for script in _sed_scripts(args):
        problem = sed_script_problem(script)
        if problem:
            return problem
    return None


_AWK_UNSAFE = re.compile(r"system|getline|@|\||>")


def _awk(args: Sequence[str]) -> str | None:
    """awk's program can run commands (``system``, pipes, ``getline``), write files
    (``print > file``) and, in gawk, call functions by name (``@f()``): any word of the
    call that holds one of these is outside, a comparison with ``>`` included."""
    if any(_AWK_UNSAFE.search(a) for a in args):
        return "an awk program that may run a command or write a file"
    return None


def _awk_program(args: Sequence[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")][:1]


def _make(args: Sequence[str]) -> str | None:
    if any("=" in a and not a.startswith("-") for a in args):
        return "a make variable set on the command line can change what the recipes run"
    return None


def _tar(args: Sequence[str]) -> str | None:
    if args and re.fullmatch(r"[A-Za-z]+", args[0]) and set(args[0]) & set("CIFP"):
        return f"tar's {args[0]!r} names a directory, a program or absolute paths"
    if any(":" in a for a in args):
        return "a tar archive name with ':' is opened on another host through rsh"
    return None


def _no_other_source(args: Sequence[str]) -> str | None:
    if any(":" in a for a in args if not a.startswith("-")):
        return "a package from a URL or another source than the registry"
    return None


def _go(args: Sequence[str]) -> str | None:
    plain = [a for a in args if not a.startswith("-")]
    if plain[:1] == ["run"] and any("@" in a for a in plain[1:]):
        return "go run of a module at a version downloads and runs its code"
    return None


def _cargo(args: Sequence[str]) -> str | None:
    if args and args[0].startswith("+"):
        return "a cargo toolchain override runs another toolchain"
    return None


def _web_client(args: Sequence[str]) -> str | None:
    for arg in args:
        if arg.startswith("@") or "=@" in arg:
            return "sends the contents of a file"
        scheme = arg.split("://", 1)[0].lower() if "://" in arg else None
        if scheme is not None and scheme not in ("http", "https"):
            return f"a {scheme}:// URL"
        if arg.lower().startswith("file:"):
            return "a file: URL"
    return None


def _unzip(args: Sequence[str]) -> str | None:
    if any(a.startswith("-") and ":" in a for a in args):
        return "unzip -: extracts paths with '..' in them"
    return None


# --- the rules --------------------------------------------------------------------------

_GIT = ProgramRule(
    before_subcommand=_names(
        "--no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs "
        "--noglob-pathspecs --icase-pathspecs --no-replace-objects --version --help -h"
    ),
    # Built-in commands only: an unknown name may be an alias (which can run a shell
    # command) or an external git-<name> program.
    subcommands=_names(
        """
        status log show diff add commit restore checkout switch branch tag merge rebase
        reset revert stash fetch pull push clone init remote rm mv grep blame shortlog
        describe rev-parse rev-list ls-files ls-tree cat-file show-ref for-each-ref reflog
        cherry-pick cherry format-patch am apply archive bundle clean gc fsck notes
        range-diff whatchanged ls-remote name-rev merge-base show-branch count-objects
        verify-commit verify-tag version worktree sparse-checkout hash-object diff-tree
        diff-files diff-index check-ignore check-attr check-ref-format symbolic-ref
        prune repack pack-refs
        """
    ),
    harmless=frozenset({"c", "C", "e", "index"}),
    refuse=_names("ext-diff textconv upload-pack receive-pack separate-git-dir template"),
    per_subcommand={
        "clone": _names("c u recurse-submodules recursive"),
        "ls-remote": _names("u"),
        "archive": _names("remote"),
        "rebase": _names("x"),
        "grep": _names("O open-files-in-pager"),
    },
)
_GREP = ProgramRule(harmless=_names("c o e C include file"))
_NPM = ProgramRule(
    outside=_names(
        """
        exec x explore edit init create innit config c set publish unpublish deprecate
        dist-tag owner access adduser login logout token team org profile hook star
        unstar link ln dlx global plugin npm
        """
    ),
    refuse=_names("g global location node-options call"),
    harmless=_names("include"),
    check=_no_other_source,
)
_PIP = ProgramRule(
    outside=_names("config"),
    refuse=_names(
        "i index-url extra-index-url f find-links trusted-host r requirement t target root "
        "src python global-option build-option install-option break-system-packages report "
        "proxy"
    ),
    harmless=_names("e"),
    check=_no_other_source,
)
_RUNNERS = ProgramRule(outside=_names("run exec shell tool x dlx"), check=_no_other_source)
_AWK = ProgramRule(
    refuse=_names("f i l E p profile d dump-variables D debug source pretty-print"),
    check=_awk,
    code=_awk_program,
)
_TAR = ProgramRule(
    refuse=_names(
        "I F P to-command checkpoint-action use-compress-program info-script "
        "new-volume-script rmt-command rsh-command absolute-names"
    ),
    harmless=_names("c o file"),
    check=_tar,
)
_CURL = ProgramRule(
    refuse=_names(
        "O remote-name remote-name-all J remote-header-name T upload-file D dump-header K w "
        "write-out trace trace-ascii libcurl stderr unix-socket abstract-unix-socket "
        "netrc-file"
    ),
    check=_web_client,
)
_WGET = ProgramRule(
    refuse=_names(
        "O output-document a append-output P post-file body-file use-askpass save-cookies "
        "warc-file rejected-log"
    ),
    check=_web_client,
)

RULES: dict[str, ProgramRule] = {
    "git": _GIT,
    **dict.fromkeys(("grep", "egrep", "fgrep"), _GREP),
    "rg": ProgramRule(refuse=_names("pre hostname-bin z search-zip"), harmless=_GREP.harmless),
    "find": ProgramRule(
        single_dash_long=True,
        generic=False,
        refuse=_names("exec execdir ok okdir delete fls fprint fprint0 fprintf"),
    ),
    **dict.fromkeys(("fd", "fdfind"), ProgramRule(refuse=_names("x X exec exec-batch"))),
    "sed": ProgramRule(
        refuse=_names("i in-place f"), harmless=_names("e"), check=_sed, code=_sed_scripts
    ),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _AWK),
    **dict.fromkeys(("tar", "gtar", "bsdtar"), _TAR),
    "zip": ProgramRule(refuse=_names("T TT")),
    "unzip": ProgramRule(check=_unzip),
    "curl": _CURL,
    "wget": _WGET,
    **dict.fromkeys(("npm", "yarn", "pnpm"), _NPM),
    "pip": _PIP,
    **dict.fromkeys(("uv", "pipx", "poetry", "pdm", "hatch"), _RUNNERS),
    "python": ProgramRule(refuse=_names("m")),
    **dict.fromkeys(
        ("node", "nodejs"),
        ProgramRule(
            refuse=_names(
                "e eval p print r require import loader experimental-loader inspect-brk "
                "env-file snapshot-blob"
            )
        ),
    ),
    "perl": ProgramRule(refuse=_names("e E M m i d")),
    "ruby": ProgramRule(refuse=_names("e r i require")),
    "php": ProgramRule(refuse=_names("r B R E F d S")),
    "java": ProgramRule(
        single_dash_long=True,
        check=lambda args: (
            "a JVM option that loads an agent or runs a command"
            if any(a.startswith(("-XX", "-agent", "-javaagent", "-Xrun")) for a in args)
            else None
        ),
    ),
    **dict.fromkeys(
        ("make", "gmake"),
        ProgramRule(refuse=_names("f file makefile I include-dir E eval"), check=_make),
    ),
    "cargo": ProgramRule(
        subcommands=_names(
            "build b check c test t run r bench doc d new init add remove rm update search "
            "install uninstall clean fetch fix fmt clippy tree metadata package vendor "
            "verify-project version locate-project generate-lockfile pkgid help"
        ),
        refuse=_names("Z manifest-path registry index git"),
        check=_cargo,
    ),
    "go": ProgramRule(
        single_dash_long=True,
        outside=_names("tool"),
        refuse=_names("toolexec modfile overlay ldflags gccgoflags asmflags vettool"),
        per_subcommand={"env": _names("w u")},
        check=_go,
    ),
    "ls": ProgramRule(harmless=_names("C c o directory")),
    "cat": ProgramRule(harmless=_names("e")),
    **dict.fromkeys(
        ("head", "tail", "wc", "uniq", "du", "od", "stat"), ProgramRule(harmless=_names("c"))
    ),
    "cut": ProgramRule(harmless=_names("c output-delimiter")),
    "sort": ProgramRule(harmless=_names("c C")),
    "diff": ProgramRule(harmless=_names("c C e")),
    "tr": ProgramRule(harmless=_names("c C")),
    "echo": ProgramRule(harmless=_names("e")),
    "ps": ProgramRule(harmless=_names("e o C c")),
}


def rule_for(program: str) -> ProgramRule | None:
    """The rule for a program (by its name, a path's last part): exact, or without a
    version suffix (``python3.11`` and ``pip3`` use ``python``'s and ``pip``'s)."""
    name = program.rsplit("/", 1)[-1]
    return RULES.get(name) or RULES.get(name.rstrip("0123456789.")) or None
