"""A conversation as a tree of rows: which rows a branch holds, and the tree's shape. Pure.

Every row has a parent (``Message.parent_seq``; 0 for a first row). Usually it is the row
written just before it (seq - 1). When the conversation's branch was moved before a row
was written (an edit, a regenerate, a switch to another leaf), the row's parent is the
row the branch was moved to instead, and the row starts a new *run*: a stretch of rows
with consecutive seqs, each the child of the one before. A conversation that never
branched is one run, and the store keeps a row's parent only where a run starts (a
``parent_seq`` column that is NULL elsewhere), so writing and reading it costs what it
did before trees.

- ``Branch``: the conversation's current branch as the store keeps it: the seq ranges of
  its rows up to the row it was moved to, and ``since``: every row written after that
  (a seq greater than ``since``) is on it too, as every append goes to the current
  branch. ``Branch()`` is every row (a conversation that never branched).
- ``Tree``: the runs of a conversation (the store reads them with one scan of an index
  that holds the run starts only), from which a row's parent, children and siblings,
  the leaves, and the branch that ends at any row are worked out.

A new branch's rows always get new, higher seqs, so a branch's rows in seq order are
its rows from the root to its leaf: ``seq`` stays the durable position a stream resumes
from.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

SEQ_END = 2**31 - 1  # no seq is larger (a 32-bit column): the open end of a range


@dataclass(frozen=True, slots=True)
class Branch:
    """The rows of one branch: those in ``ranges`` (closed, ascending, each a run's part)
    and every row with a seq greater than ``since``."""

    ranges: tuple[tuple[int, int], ...] = ()
    since: int = 0

    def __contains__(self, seq: object) -> bool:
        if not isinstance(seq, int):
            return False
        if seq > self.since:
            return True
        index = bisect.bisect_right(self.ranges, (seq, SEQ_END)) - 1
        return index >= 0 and self.ranges[index][0] <= seq <= self.ranges[index][1]

    @property
    def whole(self) -> bool:
        """Every row of the conversation (it never branched)."""
        return self.since == 0 and not self.ranges

    def spans(self, after: int = 0) -> list[tuple[int, int]]:
        """The seq ranges holding the branch's rows after ``after``, oldest first (the
        last one open: up to ``SEQ_END``)."""
        out = [(max(lo, after + 1), hi) for lo, hi in self.ranges if hi > after]
        out.append((max(self.since, after) + 1, SEQ_END))
        return out

    def leaf(self, newest: int) -> int:
        """The branch's last row, given the conversation's newest seq: the newest row if
        one was written since the branch was moved, else the row it was moved to."""
        return newest if newest > self.since else self.tip

    @property
    def tip(self) -> int:
        """The row the branch was moved to (0: before the first row)."""
        return self.ranges[-1][1] if self.ranges else 0

    def columns(self) -> dict[str, Any]:
        """The branch as the conversation's row keeps it (``branch_*``; NULLs for every
        row). ``branch_tip`` is set while the next row's parent is not the row before it."""
        if self.whole:
            return {"branch_ranges": None, "branch_since": None, "branch_tip": None}
        tip = self.tip
        return {
            "branch_ranges": json.dumps([list(r) for r in self.ranges], separators=(",", ":")),
            "branch_since": self.since,
            "branch_tip": None if tip == self.since else tip,
        }

    @staticmethod
    def stored(ranges: str | None, since: int | None) -> Branch:
        """The branch as the conversation's row holds it (NULLs: every row)."""
        if ranges is None or since is None:
            return Branch()
        return Branch(tuple((int(lo), int(hi)) for lo, hi in json.loads(ranges)), int(since))


WHOLE = Branch()


@dataclass(frozen=True, slots=True)
class Run:
    """Rows ``start``..``end`` (consecutive seqs), each the child of the one before; the
    first one's parent is ``parent`` (0: it is a first row)."""

    start: int
    end: int
    parent: int


@dataclass(frozen=True, slots=True)
class Tree:
    """A conversation's runs, by start. ``leaf`` is the current branch's last row (or the
    row it was moved to, while it has no row of its own yet; 0 for an empty branch)."""

    runs: tuple[Run, ...]
    leaf: int = 0
    _starts: tuple[int, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_starts", tuple(r.start for r in self.runs))

    @staticmethod
    def of(starts: Sequence[tuple[int, int]], newest: int, branch: Branch = WHOLE) -> Tree:
        """The tree from its run starts (``(seq, parent)`` of each row whose parent is not
        the row before it, in any order) and its newest seq; ``branch`` is the current one."""
        if newest < 1:
            return Tree((), 0)
        bounds = [(1, 0), *sorted(s for s in starts if 1 < s[0] <= newest)]
        runs = tuple(
            Run(start, (bounds[i + 1][0] - 1) if i + 1 < len(bounds) else newest, parent)
            for i, (start, parent) in enumerate(bounds)
        )
        return Tree(runs, branch.leaf(newest))

    @property
    def newest(self) -> int:
        return self.runs[-1].end if self.runs else 0

    def has(self, seq: int) -> bool:
        return 1 <= seq <= self.newest

    def _run(self, seq: int) -> Run:
        return self.runs[bisect.bisect_right(self._starts, seq) - 1]

    def parent(self, seq: int) -> int:
        run = self._run(seq)
        return run.parent if seq == run.start else seq - 1

    def children(self, seq: int) -> list[int]:
        """The rows whose parent is ``seq`` (0: the first rows), oldest first."""
        out = [r.start for r in self.runs if r.parent == seq]
        if seq >= 1 and seq < self._run(seq).end:
            out.append(seq + 1)
        return sorted(out)

    def siblings(self, seq: int) -> list[int]:
        """``seq`` and the other rows with its parent, oldest first."""
        return self.children(self.parent(seq))

    def leaves(self) -> list[int]:
        """The rows without children, oldest first."""
        parents = {r.parent for r in self.runs}
        return [r.end for r in self.runs if r.end not in parents]

    def is_leaf(self, seq: int) -> bool:
        return self.has(seq) and not self.children(seq)

    def path(self, seq: int) -> tuple[tuple[int, int], ...]:
        """The seq ranges of the rows from the root to ``seq`` (none for 0), ascending."""
        out: list[tuple[int, int]] = []
        while seq >= 1:
            run = self._run(seq)
            out.append((run.start, seq))
            seq = run.parent
        return tuple(reversed(out))

    def ancestors(self, seq: int) -> Iterator[int]:
        """``seq`` and each row above it, up to the root (newest first)."""
        for lo, hi in reversed(self.path(seq)):
            yield from range(hi, lo - 1, -1)

    def newest_under(self, seq: int) -> int:
        """The newest row at or under ``seq``: a leaf (nothing newer hangs from it), the
        one a switch to ``seq``'s branch goes to."""
        run = self._run(seq)
        inside = [(seq, run.end)]  # the parts of runs under ``seq``; parents come first
        for other in self.runs:
            if other.start > run.start and any(lo <= other.parent <= hi for lo, hi in inside):
                inside.append((other.start, other.end))
        return max(hi for _, hi in inside)

    def branch_to(self, seq: int) -> Branch:
        """The branch that ends at row ``seq`` (0: before the first row), as the store
        keeps it when the branch is moved there."""
        return Branch(self.path(seq), self.newest)

    def versions(self, path: Sequence[int], shown: Collection[int]) -> dict[int, list[int]]:
        """Where ``path`` (a branch's seqs, in order) forks: each row of it that has
        siblings gives them, the versions of that point, to the first row of ``shown``
        at or after it on the path (a hidden first row's versions are shown on the row a
        person sees next)."""
        forks = {r.parent for r in self.runs}
        out: dict[int, list[int]] = {}
        pending: list[int] | None = None
        for seq in path:
            if pending is None and self.parent(seq) in forks:
                siblings = self.siblings(seq)
                pending = siblings if len(siblings) > 1 else None
            if pending is not None and seq in shown:
                out[seq] = pending
                pending = None
        return out

    def describe(self) -> dict[str, Any]:
        """The tree as plain data: its runs and leaves (for the API and tests)."""
        return {
            "runs": [{"start": r.start, "end": r.end, "parent": r.parent} for r in self.runs],
            "leaves": self.leaves(),
            "leaf": self.leaf,
        }
