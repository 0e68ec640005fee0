"""What each input a conversation's worker takes begins: a new message (an edit's, a
regenerate's too), a card's answer, or an approval decided after its turn had stopped,
each opened by ``loop.opening`` and begun by ``loop.begin``. The runtime reads the
conversation and its window; the turn is observed from here, so its routing is part of
it (``ostinato.observe``)."""

from __future__ import annotations

from ostinato import observe
from ostinato.loop.begin import begin
from ostinato.loop.opening import Parts, open_input
from ostinato.store.base import Conversation, HistoryWindow, Turn
from ostinato.turns import Submission, TurnHandle


async def begin_input(
    parts: Parts,
    conversation: Conversation,
    window: HistoryWindow,
    turn: Turn,
    submission: Submission,
    history_limit: int,
) -> TurnHandle:
    """Begin the turn ``submission``'s input causes, as ``turn`` (an edit's or a
    regenerate's from the branch it forks: ``history_limit`` rows of it)."""
    with observe.turn_beginning(turn, owner=conversation.owner):
        opening, window = await open_input(
            parts, conversation, window, turn.id, submission.input, history_limit
        )
        begun = await begin(parts, conversation, window, turn, opening, submission.model)
    return TurnHandle(begun.turn, begun.rows, begun.task, begun.position)
