"""One result per tool call: the ``tool_results`` table (issue 24).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03

Each tool call that has its result gets a row whose primary key (conversation, the turn
whose row made the call, tool_use id) makes a second result impossible
(``ostinato.store.answered``). The rows are filled from the stored history; where races
before this revision left a call two results, the first (the lowest ``seq``) is kept:
the later one is taken out of its row, and a row left with no result at all is deleted
(a history sent to a provider must not hold a tool row that answers nothing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None

PAGE = 2000  # rows read at a time (keyset pages of the (conversation_id, seq) index)

_messages = sa.table(
    "messages",
    sa.column("id", sa.String()),
    sa.column("conversation_id", sa.String()),
    sa.column("turn_id", sa.String()),
    sa.column("seq", sa.Integer()),
    sa.column("blocks", sa.Text()),
)


def upgrade() -> None:
    op.create_table(
        "tool_results",
        sa.Column("conversation_id", sa.String(), nullable=False),
        sa.Column("turn_id", sa.String(), nullable=False),
        sa.Column("tool_use_id", sa.String(), nullable=False),
        sa.Column("message_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_tool_results_conversation_id_conversations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "conversation_id", "turn_id", "tool_use_id", name="pk_tool_results"
        ),
    )
    _fill(op.get_bind())


def downgrade() -> None:
    op.drop_table("tool_results")


class _Walk:
    """The history read in (conversation, seq) order: the key of every result, and the
    rows that hold a second result of some call."""

    def __init__(self) -> None:
        self.conversation: str | None = None
        self.made: dict[str, str] = {}  # tool_use id -> the turn of the newest row making it
        self.seen: set[tuple[str, str]] = set()
        self.keys: list[dict[str, str]] = []
        self.repairs: dict[str, list[Any]] = {}  # message id -> its blocks, less repeats

    def row(self, cid: str, message_id: str, turn_id: str | None, blocks: list[Any]) -> None:
        if cid != self.conversation:
            self.conversation, self.made, self.seen = cid, {}, set()
        kept: list[Any] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                self.made[str(block.get("id"))] = turn_id or ""
            elif kind == "tool_result":
                call = str(block.get("tool_use_id"))
                key = (self.made.get(call, turn_id or ""), call)
                if key in self.seen:
                    continue  # a second result: the first stands
                self.seen.add(key)
                self.keys.append({"c": cid, "t": key[0], "u": call, "m": message_id})
            kept.append(block)
        if len(kept) != len(blocks):
            self.repairs[message_id] = kept


def _fill(connection: sa.Connection) -> None:
    walk = _Walk()
    position: tuple[str, int] | None = None
    tools = sa.or_(_messages.c.blocks.like("%tool_use%"), _messages.c.blocks.like("%tool_result%"))
    while True:
        query = sa.select(
            _messages.c.conversation_id,
            _messages.c.seq,
            _messages.c.id,
            _messages.c.turn_id,
            _messages.c.blocks,
        ).where(tools)
        if position is not None:
            query = query.where(
                sa.tuple_(_messages.c.conversation_id, _messages.c.seq) > sa.tuple_(*position)
            )
        page: Sequence[Any] = connection.execute(
            query.order_by(_messages.c.conversation_id, _messages.c.seq).limit(PAGE)
        ).all()
        for cid, _seq, message_id, turn_id, text in page:
            blocks = json.loads(text)
            if isinstance(blocks, list):
                walk.row(cid, message_id, turn_id, blocks)
        _insert_keys(connection, walk)
        if len(page) < PAGE:
            break
        position = (page[-1][0], page[-1][1])
    _repair(connection, walk.repairs)


def _insert_keys(connection: sa.Connection, walk: _Walk) -> None:
    if walk.keys:
        connection.execute(
            sa.text(
                "INSERT INTO tool_results (conversation_id, turn_id, tool_use_id, message_id)"
                " VALUES (:c, :t, :u, :m)"
            ),
            walk.keys,
        )
        walk.keys = []


def _repair(connection: sa.Connection, repairs: dict[str, list[Any]]) -> None:
    """Take the second results out of their rows; a row left with none is deleted."""
    for message_id, blocks in repairs.items():
        where = _messages.c.id == message_id
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            text = json.dumps(blocks, ensure_ascii=False, separators=(",", ":"))
            connection.execute(sa.update(_messages).where(where).values(blocks=text))
        else:
            connection.execute(sa.delete(_messages).where(where))
