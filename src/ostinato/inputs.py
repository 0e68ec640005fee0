"""What each input a conversation's worker takes begins: a new message, a card's answer,
or an approval decided after its turn had stopped, each opened by ``loop.begin``'s
``open_*`` and begun there. The runtime reads the conversation and its window; the turn
is observed from here, so its routing is part of it (``ostinato.observe``)."""

from __future__ import annotations

from ostinato import observe
from ostinato.loop.begin import (
    Parts,
    begin,
    open_with_approval,
    open_with_card_answer,
    open_with_message,
)
from ostinato.store.base import Conversation, HistoryWindow, Turn
from ostinato.turns import ApprovalOutcome, CardAnswer, NewMessage, Submission, TurnHandle


async def begin_input(
    parts: Parts,
    conversation: Conversation,
    window: HistoryWindow,
    turn: Turn,
    submission: Submission,
) -> TurnHandle:
    """Begin the turn ``submission``'s input causes, as ``turn``."""
    history = window.rows
    with observe.turn_beginning(turn, owner=conversation.owner):
        match submission.input:
            case NewMessage(message=message, queued=queued, client_message_id=client_id):
                opening = await open_with_message(
                    parts,
                    conversation,
                    history,
                    turn.id,
                    message,
                    queued=queued,
                    client_message_id=client_id,
                    skill=submission.input.skill,
                    instructions=submission.input.instructions,
                )
            case CardAnswer(tool_use_id=tool_use_id, result=result):
                opening = open_with_card_answer(
                    parts, conversation.id, history, turn.id, tool_use_id, result
                )
            case ApprovalOutcome(approval=approval):
                opening = open_with_approval(parts, history, approval)
        begun = await begin(parts, conversation, window, turn, opening, submission.model)
    return TurnHandle(begun.turn, begun.rows, begun.task, begun.position)
