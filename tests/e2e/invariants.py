"""What must hold after every crash, checked through the HTTP API (and the database).

Each check returns a list of problems (empty: it holds), so a failure can show all of
them with the kill that caused them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa

Row = dict[str, Any]


def user_text(row: Row) -> str:
    return "".join(b.get("text", "") for b in row["blocks"] if b.get("type") == "text")


def tool_uses(row: Row) -> list[Row]:
    return [b for b in row["blocks"] if b.get("type") == "tool_use"]


def tool_results(row: Row) -> list[Row]:
    return [b for b in row["blocks"] if b.get("type") == "tool_result"]


def stored_once(rows: list[Row], accepted: Iterable[str], maybe: Iterable[str] = ()) -> list[str]:
    """Every accepted message is one user row (by its text, which is unique per send);
    one that was sent but may not have been accepted is at most one."""
    users = [r for r in rows if r["role"] == "user"]
    counts = Counter(user_text(r) for r in users)
    ids = Counter(
        r["metadata"].get("client_message_id")
        for r in users
        if r["metadata"].get("client_message_id")
    )
    problems = []
    for text in accepted:
        if counts[text] != 1:
            problems.append(f"accepted message {text!r} stored {counts[text]} times")
    for text in maybe:
        if counts[text] > 1:
            problems.append(f"message {text!r} (sent, maybe accepted) stored {counts[text]} times")
    problems += [f"client_message_id {i!r} on {n} user rows" for i, n in ids.items() if n > 1]
    return problems


def tool_pairs(rows: list[Row], may_wait: Iterable[str] = ()) -> list[str]:
    """Every tool_use has exactly one tool_result, in the consecutive tool rows right
    after its assistant row; no result answers a call that is not there, none is repeated.
    A call in ``may_wait`` (a card or an approval still waiting) may have no result yet,
    but only if nothing follows its tool rows."""
    waiting = set(may_wait)
    problems = []
    seen_uses: Counter[str] = Counter()
    i = 0
    while i < len(rows):
        row = rows[i]
        if row["role"] == "tool":
            ids = [r["tool_use_id"] for r in tool_results(row)]
            problems.append(f"seq {row['seq']}: tool row with no call before it answers {ids}")
            i += 1
            continue
        i += 1
        if row["role"] != "assistant":
            continue
        uses = [u["id"] for u in tool_uses(row)]
        seen_uses.update(uses)
        answers: Counter[str] = Counter()
        while i < len(rows) and rows[i]["role"] == "tool":
            answers.update(r["tool_use_id"] for r in tool_results(rows[i]))
            i += 1
        for use in uses:
            if answers[use] > 1:
                problems.append(f"seq {row['seq']}: call {use} has {answers[use]} results")
            elif answers[use] == 0:
                last = i >= len(rows)
                if use not in waiting:
                    problems.append(f"seq {row['seq']}: call {use} has no result")
                elif not last:
                    problems.append(f"seq {row['seq']}: waiting call {use} is not the last row")
        for orphan in set(answers) - set(uses):
            problems.append(f"seq {row['seq']}: result for {orphan}, not a call of that row")
    problems += [f"tool_use id {u} used {n} times" for u, n in seen_uses.items() if n > 1]
    return problems


# --- the tree (every branch, read from the database) --------------------------------------

TREE_SQL = (
    "SELECT seq, COALESCE(parent_seq, seq - 1), role, blocks, turn_id FROM messages "
    "WHERE conversation_id = :c ORDER BY seq"
)


def tree_rows(database_url: str, conversation_id: str) -> list[Row]:
    """Every row of the conversation, on every branch, with its ``parent_seq``."""
    found = query(database_url, TREE_SQL, conversation_id)
    return [
        {
            "seq": s,
            "parent_seq": p,
            "role": r,
            "blocks": json.loads(b),
            "turn_id": t,
            "metadata": {},
        }
        for s, p, r, b, t in found
    ]


def branches(rows: list[Row]) -> dict[int, list[Row]]:
    """Each leaf's branch: its rows from the root, by the leaf's seq."""
    by_seq = {r["seq"]: r for r in rows}
    parents = {r["parent_seq"] for r in rows}
    out = {}
    for leaf in (r["seq"] for r in rows if r["seq"] not in parents):
        path, seq = [], leaf
        while seq in by_seq:
            path.append(by_seq[seq])
            seq = by_seq[seq]["parent_seq"]
        out[leaf] = path[::-1]
    return out


def tree_problems(rows: list[Row], current_leaf: int, may_wait: Iterable[str] = ()) -> list[str]:
    """The tree is one tree (every row's parent is an older row of it, or the start); no
    branch shares a row with another past where they part, and a turn writes to one
    branch only; every tool_use in a branch has exactly one result in that branch (a call
    still waiting excepted, on the current branch only)."""
    by_seq = {r["seq"]: r for r in rows}
    problems = [
        f"seq {r['seq']}: its parent {r['parent_seq']} is not an older row"
        for r in rows
        if r["parent_seq"] != 0 and (r["parent_seq"] not in by_seq or r["parent_seq"] >= r["seq"])
    ]
    if problems:
        return problems
    paths = branches(rows)
    on: dict[int, set[int]] = {leaf: {r["seq"] for r in path} for leaf, path in paths.items()}
    for turn in {r["turn_id"] for r in rows if r["turn_id"]}:
        mine = [r["seq"] for r in rows if r["turn_id"] == turn]
        if not any(set(mine) <= seqs for seqs in on.values()):
            problems.append(f"turn {turn} wrote rows {mine} on more than one branch")
    for leaf, path in paths.items():
        waiting = may_wait if leaf == current_leaf else ()
        problems += [f"branch ending at {leaf}: {p}" for p in tool_pairs(path, waiting)]
    return problems


def results_for(rows: list[Row], tool_use_id: str) -> list[Row]:
    return [r for row in rows for r in tool_results(row) if r["tool_use_id"] == tool_use_id]


def result_text(block: Row) -> str:
    content = block["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


# --- straight from the database ----------------------------------------------------------

RUNNING_SQL = (
    "SELECT 'turn', id FROM turns WHERE conversation_id = :c AND status = 'running' "
    "UNION ALL SELECT 'tool call', id FROM tool_calls "
    "WHERE conversation_id = :c AND status = 'running'"
)


def running_in_db(database_url: str, conversation_id: str) -> list[str]:
    """Turns and tool-call records of the conversation still marked running."""
    found = query(database_url, RUNNING_SQL, conversation_id)
    return [f"{kind} {ident} is still running" for kind, ident in found]


def overlapping_turns(database_url: str, conversation_id: str) -> list[str]:
    """Turns of the conversation that ran at the same time: each must begin after the
    one before it ended (the database's times; the servers share one clock)."""
    sql = (
        "SELECT id, started_at, finished_at FROM turns WHERE conversation_id = :c"
        " ORDER BY started_at, id"
    )
    rows = query(database_url, sql, conversation_id)
    return [
        f"turn {later} began at {began} before turn {earlier} ended ({ended})"
        for (earlier, _, ended), (later, began, _) in itertools.pairwise(rows)
        if ended is None or began < ended
    ]


def turn_endings(database_url: str, conversation_id: str) -> list[str | None]:
    """The stop reason of each turn of the conversation, oldest first."""
    sql = "SELECT stop_reason FROM turns WHERE conversation_id = :c ORDER BY started_at, id"
    return [row[0] for row in query(database_url, sql, conversation_id)]


def query(database_url: str, sql: str, conversation_id: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (every ``:c`` is the conversation id), straight from the database."""
    url = sa.make_url(database_url)
    if url.get_backend_name() == "sqlite":
        assert url.database
        with sqlite3.connect(url.database, timeout=30) as db:
            params = (conversation_id,) * sql.count(":c")
            return [tuple(r) for r in db.execute(sql.replace(":c", "?"), params).fetchall()]
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _pg_query(url, sql, conversation_id)).result()


async def _pg_query(url: sa.URL, sql: str, conversation_id: str) -> list[tuple[Any, ...]]:
    import asyncpg

    conn = await asyncpg.connect(
        user=url.username,
        password=url.password,
        host=url.host,
        port=url.port,
        database=url.database,
    )
    try:
        return [tuple(r) for r in await conn.fetch(sql.replace(":c", "$1"), conversation_id)]
    finally:
        await conn.close()
