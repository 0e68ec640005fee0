"""The consent gate: asks a person before a tool whose risk needs it, and waits.

``ask`` is called by the loop for each such call. In order: a decision already recorded
for this tool_use (an approval decided while the server was down) is reused, so a call
never asks or runs twice; a remembered grant approves it; with no surface watching the
conversation it ends ``UNREACHABLE``; otherwise a pending approval row is written, an
``approval.requested`` frame goes out, and the call waits for ``decide`` (a person),
``dismiss`` (the user typed instead), the deadline (``UNANSWERED``) or cancellation
(``DECLINED``). Every ending is a row in the approvals table: the audit trail.

A conversation named in ``asks_in`` asks in another: a scheduled prompt's background
turn (stage one, ``ostinato.background``) asks in the conversation the schedule serves,
where a person may be watching; its card carries the background turn's ``run_id``.

``TurnConsent`` is the gate as one turn sees it: its skill's policy, and whether the turn
has taken in content from outside the conversation (after which memory writes ask).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import datetime, timedelta
from typing import Any

from ostinato.approvals import (
    SPEND,
    Approval,
    ApprovalPolicy,
    Ending,
    Grant,
    Remember,
    approver,
    arguments_hash,
    brings_outside_content,
)
from ostinato.bus import LocalBus
from ostinato.elsewhere import RECHECK_S
from ostinato.errors import Conflict, InvalidRequest, NotFound
from ostinato.frames import ApprovalDecided, ApprovalRequested
from ostinato.ids import new_id
from ostinato.messages import JSON, ToolUseBlock
from ostinato.store.base import (
    CreateApproval,
    CreateGrant,
    DecideApproval,
    RevokeGrant,
    Store,
    Turn,
    WriteOp,
    utcnow,
)
from ostinato.tools.base import Tool


class ConsentGate:
    def __init__(self, store: Store, bus: LocalBus, policy: ApprovalPolicy | None = None) -> None:
        self.store, self.bus = store, bus
        self.policy = policy or ApprovalPolicy()
        self._waiting: dict[str, asyncio.Future[Approval]] = {}
        self.asks_in: dict[str, str] = {}  # a conversation -> where its approvals are asked
        # other processes may share the store (a lease, no relay: two servers on one
        # SQLite file): a waiting turn re-reads its approval, as with a relay
        self.shared = False
        bus.on("decided", self._decided_elsewhere)

    def required(self, tool: Tool) -> bool:
        return self.policy.needs_consent(tool)

    def waiting(self, approval_id: str) -> bool:
        """Whether a running turn in this process waits on the approval."""
        return approval_id in self._waiting

    async def ask(
        self, turn: Turn, call: ToolUseBlock, tool: Tool, *, owner: str | None, seq: int
    ) -> Ending:
        cid, seq = self._where(turn, seq)
        for earlier in await self.store.list_approvals(cid):
            mine = cid == turn.conversation_id or earlier.turn_id == turn.id  # ids are reused
            if earlier.tool_use_id == call.id and earlier.ending is not None and mine:
                return earlier.ending
        approval = Approval(
            id=new_id(),
            conversation_id=cid,
            turn_id=turn.id,
            tool_use_id=call.id,
            tool=tool.name,
            arguments=call.input,
            arguments_hash=arguments_hash(tool.name, call.input),
            risk=tool.risk,
            family=tool.family(call.input) if tool.family is not None else None,
            requested_at=utcnow(),
        )
        return await self._ask(turn, approval, owner, seq)

    async def ask_spend(
        self, turn: Turn, card: JSON, key: str, *, owner: str | None, seq: int
    ) -> Ending:
        """Ask whether a turn may go past a soft spend limit (``ostinato.spend``): an
        approval of ``SPEND`` whose arguments are the card (its ``question`` and figures)
        and whose family is the limit's ``key`` for the period, so a grant (made when the
        person agrees) covers the rest of that period."""
        cid, seq = self._where(turn, seq)
        approval = Approval(
            id=new_id(),
            conversation_id=cid,
            turn_id=turn.id,
            tool_use_id=f"spend_{new_id()}",
            tool=SPEND,
            arguments=card,
            arguments_hash=arguments_hash(SPEND, card),
            risk=SPEND,
            family=key,
            requested_at=utcnow(),
        )
        return await self._ask(turn, approval, owner, seq)

    async def _ask(self, turn: Turn, approval: Approval, owner: str | None, seq: int) -> Ending:
        """A grant, nobody watching, or a person: how ``approval`` ends (written)."""
        cid = approval.conversation_id
        grant = await self._grant_for(
            owner, cid, approval.tool, approval.arguments_hash, approval.family
        )
        if grant is not None:
            return await self._record(approval, Ending.APPROVED, f"grant {grant.id}")
        if not await self.bus.watched(cid):  # here or on another server
            return await self._record(approval, Ending.UNREACHABLE, None)
        future: asyncio.Future[Approval] = asyncio.get_running_loop().create_future()
        self._waiting[approval.id] = future
        try:
            await self.store.write(CreateApproval(approval))
            self.bus.publish(
                cid,
                ApprovalRequested(
                    run_id=turn.run_id,
                    seq=seq,
                    approval_id=approval.id,
                    tool_use_id=approval.tool_use_id,
                    tool=approval.tool,
                    input=approval.arguments,
                    risk=approval.risk,
                    family=approval.family,
                    expires_in_s=self.policy.timeout,
                ),
            )
            try:
                decided = await self._wait(approval.id, future)
            except TimeoutError:
                decided = await self._close(approval, Ending.UNANSWERED, None)
            except asyncio.CancelledError:
                await asyncio.shield(self._close(approval, Ending.DECLINED, "cancelled"))
                raise
        finally:
            self._waiting.pop(approval.id, None)
        self._announce(turn.run_id, seq, decided)
        assert decided.ending is not None
        return decided.ending

    def _where(self, turn: Turn, seq: int) -> tuple[str, int]:
        """The conversation a turn's approval is asked in (``asks_in``), and the seq its
        frame carries there."""
        cid = self.asks_in.get(turn.conversation_id, turn.conversation_id)
        return cid, (seq if cid == turn.conversation_id else self.bus.last_seq(cid))

    async def decide(
        self,
        conversation_id: str,
        approval_id: str,
        *,
        approve: bool,
        remember: Remember = "none",
        who: str | None = "user",
        expires_in: float | None = None,
    ) -> Approval:
        """A person's decision. ``Conflict`` if the approval was already decided."""
        approval = await self.store.get_approval(approval_id)
        if approval is None or approval.conversation_id != conversation_id:
            raise NotFound(f"no approval {approval_id!r} in conversation {conversation_id!r}")
        if remember == "family" and approval.family is None:
            raise InvalidRequest(
                f"a call to {approval.tool!r} with these arguments belongs to no family; "
                "remember it as 'exact' or 'none'"
            )
        ending = Ending.APPROVED if approve else Ending.DECLINED
        if approval.tool == SPEND and approve:  # agreed for the rest of the period
            remember = "family"
        ops: list[WriteOp] = [
            DecideApproval(approval_id, ending, utcnow(), approver(ending, who), remember)
        ]
        if approve and remember != "none":
            conversation = await self.store.get_conversation(conversation_id)
            owner = conversation.owner if conversation else None
            ops.append(CreateGrant(self._grant(approval, owner, remember, expires_in)))
        decided, *_ = await self.store.write(*ops)
        future = self._waiting.get(approval_id)
        if future is None:  # its turn may wait on another server (``ostinato.elsewhere``)
            self.bus.command("decided", conversation_id, {"approval": approval_id})
        elif not future.done():
            future.set_result(decided)
        return decided  # type: ignore[no-any-return]

    async def _wait(self, approval_id: str, future: asyncio.Future[Approval]) -> Approval:
        """The decision, by ``decide`` here or (with a relay, or a store ``shared``
        without one) another server; raises ``TimeoutError`` at the policy's deadline."""
        async with asyncio.timeout(self.policy.timeout):
            while True:
                recheck = RECHECK_S if self.bus.relay is not None or self.shared else None
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(asyncio.shield(future), recheck)
                await self._decided_elsewhere("", {"approval": approval_id})

    async def _decided_elsewhere(self, _conversation_id: str, data: dict[str, Any]) -> None:
        """Another server recorded a decision: the turn waiting on it here goes on."""
        approval_id = str(data.get("approval"))
        future = self._waiting.get(approval_id)
        if future is None or future.done():
            return
        approval = await self.store.get_approval(approval_id)
        if approval is not None and approval.ending is not None and not future.done():
            future.set_result(approval)

    async def dismiss(self, conversation_id: str) -> list[Approval]:
        """The user typed instead of answering: every approval waiting here is DISMISSED."""
        dismissed = []
        for approval in await self.store.list_approvals(conversation_id, pending_only=True):
            future = self._waiting.get(approval.id)
            if future is None:  # its turn may wait on another server (``ostinato.elsewhere``)
                closed = await self._dismiss_elsewhere(approval)
                if closed is not None:
                    dismissed.append(closed)
                continue
            try:
                decided = await self._close(approval, Ending.DISMISSED, None)
            except Conflict:
                continue
            if not future.done():
                future.set_result(decided)
            dismissed.append(decided)
        return dismissed

    async def _dismiss_elsewhere(self, approval: Approval) -> Approval | None:
        """Dismiss an approval whose turn waits on another server: the ending is written
        here, and ``decided`` tells that server's turn to read it and go on."""
        if self.bus.relay is None and not self.shared:
            return None
        turn = await self.store.get_turn(approval.turn_id)
        if turn is None or turn.status != "running":
            return None  # a paused turn's approval: the new turn answers it
        closed = await self._close(approval, Ending.DISMISSED, None)
        if closed.ending != Ending.DISMISSED:
            return None  # decided first by someone else
        self.bus.command("decided", approval.conversation_id, {"approval": approval.id})
        return closed

    async def revoke(self, grant_id: str) -> Grant:
        await self.store.write(RevokeGrant(grant_id, utcnow()))
        grant = await self.store.get_grant(grant_id)
        assert grant is not None
        return grant

    # --- internals -------------------------------------------------------------------

    async def _grant_for(
        self, owner: str | None, cid: str, tool: str, args_hash: str, family: str | None
    ) -> Grant | None:
        now = utcnow()
        for grant in await self.store.list_grants(owner=owner, conversation_id=cid):
            if grant.covers(tool, args_hash, family, now):
                return grant
        return None

    def _grant(
        self, approval: Approval, owner: str | None, remember: Remember, expires_in: float | None
    ) -> Grant:
        """Grants belong to the conversation's owner, or to the conversation if it has none."""
        now = utcnow()
        key = approval.family if remember == "family" else approval.arguments_hash
        assert key is not None
        return Grant(
            id=new_id(),
            owner=owner,
            conversation_id=None if owner else approval.conversation_id,
            tool=approval.tool,
            scope="family" if remember == "family" else "exact",
            key=key,
            created_at=now,
            expires_at=_reset_of(approval)
            if approval.tool == SPEND
            else (now + timedelta(seconds=expires_in) if expires_in else None),
            approval_id=approval.id,
        )

    async def _record(self, approval: Approval, ending: Ending, who: str | None) -> Ending:
        """Write an approval that ended at once (a grant, nobody to ask) as its audit row."""
        decided = dataclasses.replace(
            approval,
            status="decided",
            ending=ending,
            decided_at=utcnow(),
            decided_by=approver(ending, who) if who is None else who,
        )
        await self.store.write(CreateApproval(decided))
        return ending

    async def _close(self, approval: Approval, ending: Ending, who: str | None) -> Approval:
        """End a pending approval; if someone decided first, their decision stands."""
        try:
            decided, *_ = await self.store.write(
                DecideApproval(approval.id, ending, utcnow(), approver(ending, who))
            )
        except Conflict:
            current = await self.store.get_approval(approval.id)
            assert current is not None
            return current
        return decided  # type: ignore[no-any-return]

    def _announce(self, run_id: str, seq: int, approval: Approval) -> None:
        self.bus.publish(
            approval.conversation_id,
            ApprovalDecided(
                run_id=run_id,
                seq=seq,
                approval_id=approval.id,
                tool_use_id=approval.tool_use_id,
                ending=str(approval.ending),
                decided_by=approval.decided_by,
            ),
        )


def _reset_of(approval: Approval) -> datetime | None:
    """When the period of a spend approval's limit ends (its card says): its grant's end."""
    resets = approval.arguments.get("resets_at")
    return datetime.fromisoformat(resets) if isinstance(resets, str) else None


class TurnConsent:
    """The consent gate for one turn: the skill's policy, and whether the turn's model
    has seen content from outside the conversation (``outside``: from the history it
    starts with, then from each untrusted tool that runs in it)."""

    def __init__(
        self, gate: ConsentGate | None, policy: ApprovalPolicy | None, *, outside: bool = False
    ) -> None:
        """``gate`` None: nobody can be asked (a sub-agent); what needs consent is
        ``UNREACHABLE``."""
        self.gate = gate
        self.policy = policy or (gate.policy if gate is not None else ApprovalPolicy())
        self.outside = outside

    def required(self, tool: Tool) -> bool:
        return self.policy.needs_consent(tool, outside=self.outside)

    def took_in(self, tool: Tool) -> None:
        if brings_outside_content(tool):
            self.outside = True

    async def ask(
        self, turn: Turn, call: ToolUseBlock, tool: Tool, *, owner: str | None, seq: int
    ) -> Ending:
        if self.gate is None:
            return Ending.UNREACHABLE
        return await self.gate.ask(turn, call, tool, owner=owner, seq=seq)

    async def ask_spend(
        self, turn: Turn, card: JSON, key: str, *, owner: str | None, seq: int
    ) -> Ending:
        if self.gate is None:
            return Ending.UNREACHABLE
        return await self.gate.ask_spend(turn, card, key, owner=owner, seq=seq)
