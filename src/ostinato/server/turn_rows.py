"""A request's turn read back from the store, for the surfaces that keep a record of a
request and answer from the rows (a stored response, an Agent Protocol run).

The turn is the one the request began: known (an approval the request answered), or
found by its first row (the request's message, stored with the request's id as its
``client_message_id``; with no message, the first row of a turn after the request
began). Its rows are read, then the turn: a turn read as ended comes with every row that
ended it, even when its last write (a final answer commits with the turn's end, in one
write) landed between the two reads.
"""

from __future__ import annotations

from ostinato.messages import Message
from ostinato.store.base import Store, Turn
from ostinato.store.tree import Branch

PAGE = 200
SCAN = 5000  # rows read at most to find a request's turn


async def read_turn(
    store: Store,
    conversation_id: str,
    after_seq: int,
    message_id: str | None,
    known: str | None,
    branch: Branch | None = None,
) -> tuple[Turn | None, list[Message]]:
    """The turn begun by the request that began after ``after_seq`` (``known``, or found
    by ``message_id``), and its rows (of ``branch``; None: the current one)."""
    read = _Reader(store, conversation_id, message_id, branch)
    turn_id, rows = await read.rows(after_seq, known)
    turn = await store.get_turn(turn_id) if turn_id else None
    if turn is not None and turn.status == "finished":  # rows committed with its end after
        begun = bool(rows)
        start = (rows[-1].seq or after_seq) if begun else after_seq
        rows += (await read.rows(start, turn.id, begun=begun))[1]
    return turn, rows


class _Reader:
    def __init__(
        self, store: Store, conversation_id: str, message_id: str | None, branch: Branch | None
    ) -> None:
        self.store, self.conversation_id = store, conversation_id
        self.message_id, self.branch = message_id, branch

    def starts(self, row: Message) -> bool:
        """Whether ``row`` is the first of the request's turn, when that is not known."""
        if self.message_id is None:
            return row.turn_id is not None
        return row.role == "user" and row.metadata.get("client_message_id") == self.message_id

    async def rows(
        self, after_seq: int, turn_id: str | None, *, begun: bool = False
    ) -> tuple[str | None, list[Message]]:
        """The turn and its rows after ``after_seq`` (a later turn's are not read; with
        ``begun``, ``after_seq`` is a row of the turn's own), reading at most ``SCAN`` rows
        (a turn's rows follow each other in seq order, whichever branch is current now)."""
        out: list[Message] = []
        read = 0
        while read < SCAN:
            page = await self.store.list_messages(
                self.conversation_id, after_seq=after_seq, limit=PAGE, branch=self.branch
            )
            read += len(page)
            for row in page:
                if turn_id is None and self.starts(row):
                    turn_id = row.turn_id
                if turn_id is None or row.turn_id is None:
                    continue
                if row.turn_id == turn_id:
                    out.append(row)
                elif out or begun:  # the next turn: this one's rows are all read
                    return turn_id, out
            if len(page) < PAGE:
                break
            after_seq = page[-1].seq or after_seq
        return turn_id, out
