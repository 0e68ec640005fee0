"""``ConversationHolds`` for both SQL engines: the ``conversation_holds`` table.

A hold is taken by a compare-and-set in one transaction of its own: made ours if it is
already ours (a new worker token) or its holder's lease is not live (missing or
expired, by the store's clock), else inserted if there is none; never while another
server's turn of the conversation is still marked running (a dead server's turn is
first closed by recovery, so a new turn never overlaps it in the records). Two servers that try at
once: one wins. On PostgreSQL the three steps are one statement (``_claim_at_once``), one
round trip; a hold is released by one statement alone. See ``ostinato.holds``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ostinato.store.sql.leases import SQLLeases
from ostinato.store.sql.tables import conversation_holds, servers, turns

holds = conversation_holds


@cache
def _statements(dialect: str) -> dict[str, sa.Executable]:
    now = (
        sa.func.now()
        if dialect == "postgresql"
        else sa.bindparam("now", type_=servers.c.expires_at.type)
    )
    live = sa.select(servers.c.id).where(servers.c.expires_at > now)
    mine = holds.c.conversation_id == sa.bindparam("cid")
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(holds)
    return {
        "take": sa.update(holds)
        .where(mine, sa.or_(holds.c.holder == sa.bindparam("me"), holds.c.holder.not_in(live)))
        .values(holder=sa.bindparam("me"), token=sa.bindparam("token")),
        "add": insert.values(
            conversation_id=sa.bindparam("cid"),
            holder=sa.bindparam("me"),
            token=sa.bindparam("token"),
        ).on_conflict_do_nothing(),
        "running": sa.select(turns.c.id).where(
            turns.c.conversation_id == sa.bindparam("cid"),
            turns.c.status == "running",
            turns.c.holder.is_distinct_from(sa.bindparam("me")),
        ),
        "release": sa.delete(holds).where(mine, holds.c.token == sa.bindparam("token")),
        "held": sa.select(holds.c.holder).where(
            mine, holds.c.holder != sa.bindparam("me"), holds.c.holder.in_(live)
        ),
    }


@cache
def _claim_at_once() -> sa.Executable:
    """PostgreSQL's claim as one statement (``claim_conversation``): the three steps of
    the transaction as parts of one, each but the first only where the ones before it
    did not decide; a row for a hold taken or made, none for a refusal."""
    stmts = _statements("postgresql")
    running = stmts["running"].cte("running")  # type: ignore[attr-defined]
    first = ~sa.exists(running.select())
    hit: sa.Label[Any] = sa.literal_column("1").label("hit")
    take = stmts["take"].where(first).returning(hit).cte("take")  # type: ignore[attr-defined]
    values = [sa.bindparam(name, type_=sa.String()) for name in ("cid", "me", "token")]
    made = sa.select(*values).where(first, ~sa.exists(take.select()))
    add = (
        postgresql.insert(holds)
        .from_select(["conversation_id", "holder", "token"], made)
        .on_conflict_do_nothing()
        .returning(hit)
        .cte("add")
    )
    return sa.select(take.c.hit).union_all(sa.select(add.c.hit))


class SQLHolds(SQLLeases):
    """The hold methods of ``SQLiteStore`` and ``PostgresStore``."""

    def _now_params(self) -> dict[str, Any]:
        params = self._clock_params(0.0)
        return {"now": params["now"]} if "now" in params else {}

    async def claim_conversation(self, conversation_id: str, holder: str, token: str) -> bool:
        stmts = _statements(self._dialect)
        params = {"cid": conversation_id, "me": holder, "token": token, **self._now_params()}
        if self._dialect == "postgresql":  # one statement: one round trip
            return bool(await self._lease_one(_claim_at_once(), params))

        def work(tx: Any) -> bool:
            if tx.rows(stmts["running"], params):  # a gone server's turn, not yet recovered
                return False
            if tx.execute(stmts["take"], params):
                return True
            return bool(tx.execute(stmts["add"], params))

        return await self._lease_write(work)

    async def release_conversation(self, conversation_id: str, token: str) -> None:
        params = {"cid": conversation_id, "token": token}
        await self._lease_one(_statements(self._dialect)["release"], params)

    async def held_elsewhere(self, conversation_id: str, holder: str) -> bool:
        """Whether another live server holds the conversation."""
        params = {"cid": conversation_id, "me": holder, **self._now_params()}
        return bool(await self._fetch(_statements(self._dialect)["held"], params))
