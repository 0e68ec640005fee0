"""What each input a conversation's worker takes begins: a new message (an edit's, a
regenerate's too), a card's answer, or an approval decided after its turn had stopped,
each opened by ``loop.opening`` and begun by ``loop.begin``. The runtime reads the
conversation and its window; the turn is observed from here, so its routing is part of
it (``ostinato.observe``)."""

from __future__ import annotations

import asyncio
import contextlib

from ostinato import observe
from ostinato.loop.begin import begin
from ostinato.loop.opening import Parts, open_input
from ostinato.store.base import Conversation, HistoryWindow, Turn
from ostinato.submissions import Input, Submission, TurnHandle
from ostinato.turns import Workers


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


async def continued(workers: Workers, conversation_id: str, work: Input, most_s: float) -> None:
    """Queue ``work``, an input stored already (an approval decided after its turn had
    stopped), and return once its turn has begun, so that whoever reads the conversation
    after the caller's answer finds it ``running`` (or done), not still ``paused``.
    At most ``most_s`` (the turn may wait for a slot); whatever stops the turn from
    beginning is not raised here: the input is stored either way, and this wait changes
    nothing of what becomes of it."""
    submission = Submission(work)
    workers.add(conversation_id, submission)
    with contextlib.suppress(Exception):  # TimeoutError too; a cancel still ends the wait
        await asyncio.wait_for(submission.handle(), most_s)
