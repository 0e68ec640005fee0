"""The tree's rules, pure (``store.tree``): runs from their starts, parents, children,
siblings, leaves, paths, the branch that ends at a row, and where versions are shown."""

from __future__ import annotations

import pytest

from ostinato.store.tree import SEQ_END, WHOLE, Branch, Tree

# 1-2-3-4 (a branch), then 5-6 after 2 (an edit of 3), then 7 after 4 (a switch back to
# 4, and a turn), then 8 after 0 (an edit of the first row), then 9 after 5 (a regenerate)
STARTS = [(5, 2), (7, 4), (8, 0), (9, 5)]
TREE = Tree.of(STARTS, 9)


def test_runs_from_their_starts() -> None:
    assert [(r.start, r.end, r.parent) for r in TREE.runs] == [
        (1, 4, 0),
        (5, 6, 2),
        (7, 7, 4),
        (8, 8, 0),
        (9, 9, 5),
    ]
    assert Tree.of([], 0).runs == () and Tree.of([], 3).leaves() == [3]


@pytest.mark.parametrize(
    ("seq", "parent", "children", "siblings"),
    [
        (1, 0, [2], [1, 8]),
        (2, 1, [3, 5], [2]),
        (3, 2, [4], [3, 5]),
        (4, 3, [7], [4]),
        (5, 2, [6, 9], [3, 5]),
        (6, 5, [], [6, 9]),
        (7, 4, [], [7]),
        (8, 0, [], [1, 8]),
        (9, 5, [], [6, 9]),
    ],
)
def test_parents_children_and_siblings(
    seq: int, parent: int, children: list[int], siblings: list[int]
) -> None:
    assert TREE.parent(seq) == parent
    assert TREE.children(seq) == children
    assert TREE.siblings(seq) == siblings


def test_leaves_paths_and_the_newest_row_under_a_row() -> None:
    assert TREE.leaves() == [6, 7, 8, 9]
    assert TREE.children(0) == [1, 8]
    assert [TREE.is_leaf(s) for s in (4, 6, 10, 0)] == [False, True, False, False]
    assert TREE.path(7) == ((1, 4), (7, 7))
    assert TREE.path(9) == ((1, 2), (5, 5), (9, 9))
    assert TREE.path(0) == ()
    assert list(TREE.ancestors(9)) == [9, 5, 2, 1]
    assert [TREE.newest_under(s) for s in (1, 3, 5, 6, 8)] == [9, 7, 9, 6, 8]


def test_a_branch_holds_its_ranges_and_everything_after_since() -> None:
    branch = TREE.branch_to(6)
    assert branch == Branch(((1, 2), (5, 6)), 9)
    assert [s for s in range(1, 12) if s in branch] == [1, 2, 5, 6, 10, 11]
    assert branch.spans() == [(1, 2), (5, 6), (10, SEQ_END)]
    assert branch.spans(5) == [(6, 6), (10, SEQ_END)]
    assert branch.leaf(9) == 6 and branch.leaf(10) == 10 and branch.tip == 6
    assert all(s in WHOLE for s in (1, 9)) and WHOLE.whole and not branch.whole
    assert WHOLE.spans() == [(1, SEQ_END)]


def test_the_columns_a_branch_is_kept_in() -> None:
    assert WHOLE.columns() == {"branch_ranges": None, "branch_since": None, "branch_tip": None}
    moved = TREE.branch_to(6)
    columns = moved.columns()
    assert columns == {"branch_ranges": "[[1,2],[5,6]]", "branch_since": 9, "branch_tip": 6}
    assert Branch.stored(columns["branch_ranges"], columns["branch_since"]) == moved
    newest = TREE.branch_to(9)  # to the newest row: the next row follows it anyway
    assert newest.columns()["branch_tip"] is None
    assert Branch.stored(None, None) == WHOLE


def test_versions_are_shown_on_the_first_row_a_person_sees() -> None:
    path = [1, 2, 5, 9]  # 9's branch; 5 has a sibling (3), 9 has one (6)
    assert TREE.versions(path, {1, 2, 5, 9}) == {1: [1, 8], 5: [3, 5], 9: [6, 9]}
    assert TREE.versions(path, {1, 2, 9}) == {1: [1, 8], 9: [3, 5]}  # 5 hidden: on 9
