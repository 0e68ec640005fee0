"""Work done for a turn after it ended (fact extraction), counted in the turn's record.

The work runs in a background scope of its own (``ostinato.observe``: its own trace,
linked to the turn's); when it ends, the model calls it made are added to the turn's
metrics block and to its timeline (``after_turn``), and both are written again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from ostinato import observe
from ostinato.store.base import SetTurnMetrics, Store

log = logging.getLogger("ostinato.loop")

T = TypeVar("T")


async def accounted(store: Store, work: Awaitable[T], name: str = "after_turn") -> T:
    """Run ``work`` (started in the context of the turn it is for) and record its model
    calls with that turn."""
    with observe.background(name) as job:
        result = await work
    turn = job.link
    if isinstance(turn, observe.TurnScope) and job.ledger.calls:
        turn.ledger.absorb(job.ledger)
        metrics = turn.ledger.snapshot(turn.model)
        route = turn.route if turn.route is not None else await _stored_route(store, turn)
        if route is not None:
            metrics["route"] = route
        try:
            await store.write(SetTurnMetrics(turn.turn_id, metrics, turn.ledger.timeline()))
        except Exception:  # the turn's answer is out already; its record stays as it was
            log.exception("could not add the calls after turn %s to its record", turn.turn_id)
    return result


async def _stored_route(store: Store, turn: observe.TurnScope) -> Any:
    """The routing in the turn's stored metrics (a turn whose driver had none to give
    its scope)."""
    stored = await store.get_turn(turn.turn_id)
    return stored.metrics.get("route") if stored is not None else None
