"""Shell families: which calls a remembered "family" grant for a program covers. Pure.

A family grant lets a person say "run git without asking me". It must cover only calls
that cannot change what program runs or where it writes: ``git status`` and ``git log
-5`` are in ``git``'s family; ``git -c alias.x='!touch /tmp/pwned' x`` (runs a shell
command), ``git -c core.pager=... log``, ``git --exec-path=/tmp status`` and ``git status
--output=/tmp/x`` are not, and ask every time (unless an exact grant covers them).

``classify(command)`` checks these rules in order; the first that applies puts the call
outside every family (``OutsideFamily`` says why):

1. **Shape.** An empty command; a control character or line break anywhere; outside
   quotes an operator or redirect (``; & | < > ( )``), a substitution or variable (``$``,
   a backquote) or an escape (a backslash); inside double quotes ``$``, a backquote or a
   backslash; an unclosed quote; a comment. Inside single quotes everything is literal.
2. **The program word** is written plainly (letters, digits, ``_ . + - /``; no quotes,
   globs, ``~`` or ``=``, so no environment prefix), is not a shell keyword, and does not
   step out of the workdir with ``..``.
3. **Wrappers**: programs that run a command given as their arguments (``sh``, ``env``,
   ``sudo``, ``xargs``, ``npx``, ``docker``, editors, ...) have no family.
4. **Unknown expansions**: an unquoted glob at the start of an argument or anywhere in
   an option (it may expand to an option, e.g. a file named
   ``--checkpoint-action=exec=sh x``), or in a path step starting with ``.`` (it may
   expand to ``..``).
5. **Outside the workdir**: an argument that is an absolute path, starts with ``~`` or
   has a ``..`` step; the same for the value after any ``=`` and for a value glued to a
   short option (``-I/usr/include``).
6. **The program's own rule** (``family_rules.RULES``, by the program's name): options
   allowed before the subcommand, the subcommands it may have, subcommands never covered,
   options refused (everywhere, or with one subcommand), and its own check of the
   arguments (sed scripts, awk programs, make variables, ...).
7. **The generic option rule**, for every program unless its rule replaces it: ``-c``,
   ``-C``, ``-o``, ``-e`` (alone or in a cluster of letters) and long options named for
   configuration, code to load or run, output files, directories, prefixes, plugins,
   hooks, pagers, editors, shells, registries (``family_rules.GENERIC_*``), except the
   ones the program's rule lists as harmless for it and ``--no-...`` switches.
8. Otherwise the call is in the family of its program word, exactly as written
   (``/usr/bin/git`` is its own family, not ``git``'s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ostinato.tools.family_rules import (
    GENERIC_LONG_CONTAINS,
    GENERIC_LONG_EXACT,
    GENERIC_LONG_PREFIXES,
    GENERIC_SHORT,
    SWITCHED_OFF,
    WRAPPERS,
    ProgramRule,
    rule_for,
)

_OPERATORS = frozenset(";&|<>()")
_EXPANSIONS = frozenset("$`\\")
_GLOBS = frozenset("*?[")
_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*|[A-Za-z0-9_.+-]*/[A-Za-z0-9_./+-]*")
_RESERVED_WORDS = frozenset(
    ("!", "{", "}", "[[", "]]", "case", "coproc", "do", "done", "elif", "else", "esac"),
) | frozenset(("fi", "for", "function", "if", "in", "select", "then", "until", "while"))
_NO_RULE = ProgramRule()


@dataclass(frozen=True, slots=True)
class InFamily:
    family: str


@dataclass(frozen=True, slots=True)
class OutsideFamily:
    reason: str


Family: TypeAlias = InFamily | OutsideFamily


@dataclass(slots=True)
class Word:
    """One word as the program receives it, and where the shell may still expand it."""

    text: str = ""
    quoted: bool = False  # some part of it was quoted
    globs: list[int] = field(default_factory=list)  # offsets of unquoted * ? [


def split_words(command: str) -> list[Word] | str:
    """The words of a simple command, or why it is not one (rule 1)."""
    words: list[Word] = []
    word: Word | None = None
    quote = ""
    for ch in command:
        if (ord(ch) < 32 and ch != "\t") or ch == "\x7f":
            return "a control character or line break"
        if quote:
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in _EXPANSIONS:
                return "a substitution, variable or escape inside double quotes"
            else:
                assert word is not None
                word.text += ch
            continue
        if ch in " \t":
            if word is not None:
                words.append(word)
            word = None
            continue
        problem = _unquoted_problem(ch, word is None)
        if problem:
            return problem
        word = word or Word()
        if ch in "'\"":
            quote, word.quoted = ch, True
            continue
        if ch in _GLOBS:
            word.globs.append(len(word.text))
        word.text += ch
    if quote:
        return "an unclosed quote"
    return [*words, word] if word is not None else words


def _unquoted_problem(ch: str, starts_word: bool) -> str | None:
    if ch in _OPERATORS:
        return "an operator or redirect (a list, pipeline, subshell or redirection)"
    if ch in _EXPANSIONS:
        return "a substitution, variable or escape"
    if ch == "#" and starts_word:
        return "a comment"
    return None


def classify(command: str) -> Family:
    """Whether ``command`` is in a family, and which (see the module's rules)."""
    words = split_words(command)
    if isinstance(words, str):
        return OutsideFamily(words)
    if not words:
        return OutsideFamily("an empty command")
    program, args = words[0], words[1:]
    rule = rule_for(program.text) or _NO_RULE
    texts = [a.text for a in args]
    problem = _program_problem(program)
    if problem is None:
        code = rule.code(texts) if rule.code is not None else []
        problem = _arguments_problem(_without(args, code))
    if problem is None:
        problem = _rule_problem(rule, texts)
        if problem is None and rule.generic:
            problem = _generic_problem(rule, texts)
    return OutsideFamily(problem) if problem else InFamily(program.text)


def command_family(command: str) -> str | None:
    """The family of a shell command, or None when no family grant may cover it."""
    found = classify(command)
    return found.family if isinstance(found, InFamily) else None


def shell_family(arguments: Mapping[str, Any]) -> str | None:
    """The family of a ``shell`` call: ``command_family`` of its command."""
    command = arguments.get("command")
    return command_family(command) if isinstance(command, str) else None


# --- the rules ----------------------------------------------------------------------------


def _without(args: Sequence[Word], code: Sequence[str]) -> list[Word]:
    """The arguments but the program-text words (each taken out once)."""
    left = list(code)
    kept = []
    for arg in args:
        if arg.text in left:
            left.remove(arg.text)
        else:
            kept.append(arg)
    return kept


def _program_problem(program: Word) -> str | None:
    """Rules 2 and 3."""
    text = program.text
    if text in _RESERVED_WORDS and not program.quoted:
        return "a shell keyword"
    if text.rsplit("/", 1)[-1] in WRAPPERS:
        return f"{text} runs other commands"
    if program.quoted or program.globs or not _PROGRAM.fullmatch(text):
        return "the program is not written plainly (quotes, globs, ~, or an environment prefix)"
    if ".." in text.split("/") and "/" in text:
        return "the program is outside the workdir"
    return None


def _arguments_problem(args: Sequence[Word]) -> str | None:
    """Rules 4 and 5."""
    for arg in args:
        if arg.globs and (0 in arg.globs or arg.text.startswith("-") or _dot_glob(arg)):
            return f"the glob {arg.text!r} may expand to an option or to '..'"
        if _points_outside(arg.text):
            return f"{arg.text!r} points outside the workdir"
    return None


def _dot_glob(arg: Word) -> bool:
    """A glob in a path step that starts with ``.``: ``.*`` matches ``..``."""
    for at in arg.globs:
        step_start = max(arg.text.rfind("/", 0, at), arg.text.rfind("=", 0, at)) + 1
        if arg.text.startswith(".", step_start):
            return True
    return False


def _points_outside(text: str) -> bool:
    pieces = [text, *text.split("=")[1:]]
    if re.match(r"-[A-Za-z]", text):
        pieces.append(text[2:])  # a value glued to a short option: -I/usr/include
    for piece in pieces:
        if any(p.startswith(("/", "~")) for p in piece.split(",")):
            return True
        if ".." in re.split(r"[/,:=]", piece):
            return True
    return False


def _option_names(text: str, rule: ProgramRule) -> list[str]:
    """``--name=v`` -> [name]; ``-abc`` -> [a, b, c] (or [abc] for find-like programs)."""
    if not text.startswith("-") or text in ("-", "--"):
        return []
    if text.startswith("--"):
        return [text[2:].split("=", 1)[0]]
    if rule.single_dash_long:
        return [text[1:].split("=", 1)[0]]
    match = re.match(r"[A-Za-z]*", text[1:])
    assert match is not None
    return list(match.group())


def _rule_problem(rule: ProgramRule, args: Sequence[str]) -> str | None:
    """Rule 6: the program's own rule."""
    plain = [a for a in args if not a.startswith("-")]
    first = args.index(plain[0]) if plain else len(args)
    if rule.before_subcommand is not None:
        for arg in args[:first]:
            if arg not in rule.before_subcommand:
                return f"the option {arg!r} before the subcommand changes how or where it runs"
    subcommand = plain[0] if plain else None
    if rule.subcommands is not None and subcommand not in (None, *rule.subcommands):
        return f"{subcommand!r} is not a subcommand this family covers"
    for word in plain:
        if word in rule.outside:
            return f"the subcommand {word!r} runs, loads or configures other code"
    refused = rule.refuse | rule.per_subcommand.get(subcommand or "", frozenset())
    for arg in args:
        for name in _option_names(arg, rule):
            if name in refused:
                return f"the option {arg!r} runs or loads code, or writes elsewhere"
    return rule.check(args) if rule.check is not None else None


def _generic_problem(rule: ProgramRule, args: Sequence[str]) -> str | None:
    """Rule 7: option shapes no family covers, for any program."""
    for arg in args:
        for name in _option_names(arg, rule):
            if name in rule.harmless:
                continue
            if len(name) == 1 and name in GENERIC_SHORT:
                return f"the option {arg!r} may run code, name a file it writes or a directory"
            if len(name) > 1 and _generic_long(name):
                return f"the option {arg!r} may configure, load or run code, or write elsewhere"
    return None


def _generic_long(name: str) -> bool:
    if name.startswith(SWITCHED_OFF):
        return False
    return (
        name in GENERIC_LONG_EXACT
        or name.startswith(GENERIC_LONG_PREFIXES)
        or any(part in name for part in GENERIC_LONG_CONTAINS)
    )
