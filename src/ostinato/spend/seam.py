"""Where a model call made outside a turn's own steps finds the budgets: the gate of the
turn or job under way, in a context variable (``GATE``), set by the runtime as a turn
begins and by the job runner. It names only what such a call needs (``SideCalls``), so
``models.assembly`` depends on nothing above it; ``spend.gate.SpendGate`` is the one
that is set. With none set, a call is neither checked nor counted."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ostinato.models.base import ModelRequest, Usage


class Settle(Protocol):
    """Charges a cleared call once it has ended, at what it used (None: unknown)."""

    async def __call__(self, usage: Usage | None) -> None: ...


class SideCalls(Protocol):
    async def side_call(self, model: str, request: ModelRequest) -> Settle | None:
        """Clear a call that never asks a person: ``SpendLimitReached`` when a budget
        refuses it; what to call once it has ended."""
        ...


GATE: ContextVar[SideCalls | None] = ContextVar("ostinato_spend_gate", default=None)
