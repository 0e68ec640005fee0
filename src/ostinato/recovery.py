"""Crash recovery: closing the turns a crash left ``running`` (DESIGN invariant 8), and
taking over what a gone server held.

Recovery acts only on what a **gone** holder held (``ostinato.leases``: its lease was
released, expired, or its process is no longer on this machine), never on a live
server's turns, and takes each thing over by a compare-and-set on its holder first, so
two recovering servers never both act on one. ``sweep`` runs once at a server's start
and then after every renewal of its lease.

For each turn left running by a gone holder, every tool call without a result is
answered, in one tool message:

- a call waiting on a pending approval keeps waiting: the approval survives with its id,
  its record goes back to ``waiting``, the turn ends ``paused`` (a decision posted later
  continues it in a new turn);
- a question card (the call its assistant row is ``awaiting``) keeps waiting too, and the
  turn ends ``paused``: the card was committed, maybe shown, before the crash came in the
  moment before the turn was recorded paused; it is answered as any card;
- a spend card (an approval of ``SPEND``: no call behind it, only the model call that
  waited for it) ends ``UNANSWERED``; the person sends their message again;
- a call that never started gets "interrupted: not run";
- an idempotent call that started gets "interrupted";
- a non-idempotent call that started is reported as "outcome unknown" and is never run
  again by itself: it may or may not have taken effect.

Tool-call records still marked running are closed to match, and the turn ends
``interrupted`` (or ``paused``). Paused turns are left alone: they stay resumable. The
claim of a turn (``ClaimTurn``) is part of the write that closes it: until that commits
the turn is its gone holder's and running, so no new turn of its conversation begins
(``holds``) and repairs a history whose calls recovery is about to answer. A call that
was answered meanwhile keeps its first answer (``store.answered``).

A turn a shutting-down server handed over at a step boundary (``ostinato.handover``)
is not closed: it is claimed, and the workers go on with it.

A sweep also finds the decisions a gone holder saved but did not act on (the approval is
decided, its call still open in a paused conversation), and the queued messages a gone
holder was to run; ``sweep`` has the workers (``turns.Workers.take_over``) run both. The
spend a gone holder had reserved for calls under way is charged at its estimates
(``charge_left_holds``): a call may have been made before the crash, and a budget must
not forget it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ostinato import observe
from ostinato.approvals import SPEND, Approval, Ending, approver
from ostinato.elsewhere import announce_closed
from ostinato.errors import AlreadyAnswered, Conflict
from ostinato.handover import handed
from ostinato.leases import Holders, claim_queued, claim_turn, holders
from ostinato.loop.setup import open_tool_use, open_tool_uses
from ostinato.messages import Message, ToolResultBlock
from ostinato.store.answered import write_answers
from ostinato.store.base import (
    AppendMessage,
    ClaimTurn,
    DecideApproval,
    FinishToolCall,
    FinishTurn,
    QueuedInput,
    Store,
    ToolCallRecord,
    ToolCallStatus,
    Turn,
    TurnStopReason,
    WriteOp,
    utcnow,
)
from ostinato.store.spend import SpendStore
from ostinato.tools.registry import ToolRegistry
from ostinato.turns import Workers

NOT_STARTED = "interrupted: the server stopped before this tool call ran; it was not run"
INTERRUPTED = "interrupted: the server stopped while this tool call was running"
UNKNOWN = (
    "outcome unknown: the server stopped while this call was running, so it may or may "
    "not have taken effect; it will not be run again by itself. Check before repeating it."
)


@dataclass(frozen=True, slots=True)
class Found:
    """What one sweep took over: the turns it closed, the decisions to act on, and the
    queued messages to run (each now held by the sweeping process)."""

    closed: list[str] = field(default_factory=list)
    decided: list[Approval] = field(default_factory=list)
    queued: list[QueuedInput] = field(default_factory=list)
    handed: list[Turn] = field(default_factory=list)  # to go on with (``handover``)


async def sweep(
    store: Store,
    tools: ToolRegistry,
    workers: Workers,
    history_limit: int,
    holder: str | None,
    everything: bool = False,
) -> list[str]:
    """Take over what gone holders held, for ``holder``: close their running turns, then
    have ``workers`` act on their decisions and run their queued messages; the ids of
    the turns closed. Nothing while shutting down."""
    if workers.draining:
        return []
    found = await find(
        store, tools, holder=holder, history_limit=history_limit, everything=everything
    )
    observe.queued(len(found.queued))
    if workers.holds is not None:  # several servers: their surfaces hear of it
        await announce_closed(store, workers.holds.bus, found.closed)
    await workers.take_over(found.decided, found.queued, found.handed)
    return found.closed


async def find(
    store: Store,
    tools: ToolRegistry,
    *,
    holder: str | None,
    history_limit: int,
    everything: bool = False,
) -> Found:
    """Take over what gone holders held. Decisions are looked for at ``everything`` (a
    server's first sweep) or when this sweep found a holder newly gone: a live holder
    acts on its own."""
    who = await holders(store, holder)
    handed = await take_handed(store, holder)
    closed = await recover(store, tools, holder=holder, gone=who.gone)
    decided: list[Approval] = []
    if everything or who.dropped:
        decided = await decided_but_not_acted_on(store, history_limit, holder, who)
    queued = [
        item
        for item in await store.list_queued()
        if who.gone(item.holder) and await claim_queued(store, item.id, item.holder, holder)
    ]
    await charge_left_holds(store, who)
    return Found(closed, decided, queued, handed)


async def take_handed(store: Store, holder: str | None) -> list[Turn]:
    """The running turns a shutting-down server handed over (``ostinato.handover``),
    each claimed for ``holder`` (so ``recover`` leaves them alone): they go on here."""
    taken = []
    for turn in await store.running_turns():
        if handed(turn.holder) and await claim_turn(store, turn.id, turn.holder, holder):
            taken.append(replace(turn, holder=holder))
    return taken


async def charge_left_holds(store: Store, who: Holders) -> int:
    """Charge the spend reservations of gone holders at their estimates (``store.spend``):
    each call may have been made before its server died, so its budget keeps it; the
    number charged."""
    if not isinstance(store, SpendStore):
        return 0
    charged = 0
    for hold in await store.spend_holds():
        if who.gone(hold.holder) and await store.charge_hold(hold.id):
            charged += 1
    return charged


async def recover(
    store: Store,
    tools: ToolRegistry,
    *,
    holder: str | None = None,
    gone: Callable[[str | None], bool] = lambda _: True,
) -> list[str]:
    """Close the running turns whose holder is ``gone``, each taken over by ``holder``
    first; the ids of the turns closed."""
    closed = []
    for turn in await store.running_turns():
        if (  # a handed turn goes on (``take_handed``)
            gone(turn.holder)
            and not handed(turn.holder)
            and await _close_turn(store, tools, turn, holder)
        ):
            closed.append(turn.id)
    return closed


async def _close_turn(store: Store, tools: ToolRegistry, turn: Turn, holder: str | None) -> bool:
    """Claim the turn and close it in one write: until it commits the turn is still its
    gone holder's and running, so no new turn of the conversation begins (``holds``)
    and reads its calls as open. False if another process claimed it first."""
    messages = await store.list_messages(turn.conversation_id)
    made = open_tool_uses(messages)
    open_uses = [use for use, _ in made]
    records = {r.id: r for r in await store.list_tool_calls(turn.conversation_id)}
    waiting = await store.list_approvals(turn.conversation_id, pending_only=True)
    pending = {a.tool_use_id for a in waiting}
    # a question card is a row: once committed, it waits for its answer like a pending
    # approval, even if the crash came before the turn was recorded paused
    pending |= {
        str(card)
        for m in messages
        if m.role == "assistant" and (card := m.metadata.get("awaiting"))
    }
    ops: list[WriteOp] = [  # a spend card does not outlive its turn: nobody answered it
        DecideApproval(a.id, Ending.UNANSWERED, utcnow(), approver(Ending.UNANSWERED, None))
        for a in waiting
        if a.tool == SPEND and a.turn_id == turn.id
    ]
    blocks: list[ToolResultBlock] = []
    for use in open_uses:
        record = records.get(use.id)
        if use.id in pending:
            if record is not None and record.status != "waiting":
                ops.append(_close(record, "waiting", ""))
            continue
        status, text = _verdict(record, tools)
        blocks.append(ToolResultBlock(use.id, text, is_error=True))
        if record is not None and record.status in ("running", "waiting"):
            ops.append(_close(record, status, text))
    if blocks:
        row = Message("tool", tuple(blocks))
        earlier = {use.id: made_in for use, made_in in made if made_in != turn.id}
        ops.insert(0, AppendMessage(turn.conversation_id, row, turn.id, earlier))
    stop: TurnStopReason = "paused" if pending & {u.id for u in open_uses} else "interrupted"
    ops.append(FinishTurn(turn.id, turn.conversation_id, stop, utcnow()))
    try:  # a call answered meanwhile keeps its first answer (``store.answered``)
        await write_answers(store, ClaimTurn(turn.id, turn.holder, holder), *ops)
    except AlreadyAnswered:
        raise
    except Conflict:  # claimed by another process first? then it closes the turn
        now = await store.get_turn(turn.id)
        if now is not None and now.holder != turn.holder:
            return False
        raise
    return True


async def decided_but_not_acted_on(
    store: Store, history_limit: int, holder: str | None, who: Holders
) -> list[Approval]:
    """Approvals decided while their turn was gone (after a restart) whose call still
    has no result: the crash came between the decision and the turn that acts on it.
    Without this the conversation would wait forever on a decided call. Only those whose
    turn's holder is gone, each taken over (its turn claimed) by ``holder``."""
    found = []
    paused: dict[str, list[Message] | None] = {}
    for approval in await store.list_approvals():
        if approval.ending is None or approval.ending is Ending.UNREACHABLE:
            continue
        cid = approval.conversation_id
        if cid not in paused:
            conversation = await store.get_conversation(cid)
            paused[cid] = (
                (await store.window(cid, limit=history_limit)).rows
                if conversation is not None and conversation.state == "paused"
                else None
            )
        rows = paused[cid]
        if rows is None or open_tool_use(rows, approval.tool_use_id) is None:
            continue
        turn = await store.get_turn(approval.turn_id)
        was = turn.holder if turn is not None else None
        if who.gone(was) and (turn is None or await claim_turn(store, turn.id, was, holder)):
            found.append(approval)
    return found


def _verdict(record: ToolCallRecord | None, tools: ToolRegistry) -> tuple[ToolCallStatus, str]:
    if record is None or record.status == "waiting":
        return "interrupted", NOT_STARTED
    tool = tools.get(record.name)
    if tool is not None and tool.idempotent:
        return "interrupted", INTERRUPTED
    return "unknown", UNKNOWN


def _close(record: ToolCallRecord, status: ToolCallStatus, text: str) -> FinishToolCall:
    return FinishToolCall(record.turn_id, record.id, status, text, True, utcnow(), 0.0)
