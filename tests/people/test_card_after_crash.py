"""A question card committed just before a crash still waits after the restart.

Found by the crash test (tests/e2e/test_fault_injection.py, on PostgreSQL): the driver
commits the card's assistant row (``metadata.awaiting``) and sends ``input.requested``
before it records the turn ``paused``. A crash in between left the turn ``running``, and
recovery answered the card "interrupted: not run", so the card the user was shown could
not be answered any more.
"""

from __future__ import annotations

from ostinato.messages import Message, TextBlock, ToolUseBlock
from ostinato.models.scripted import text_step
from ostinato.store.base import (
    AppendMessage,
    SetConversationState,
    StartToolCall,
    StartTurn,
    ToolCallRecord,
    Turn,
    utcnow,
)
from tests.loop.harness import Harness


async def test_a_card_committed_before_the_crash_can_be_answered_after_it() -> None:
    h = Harness(text_step("blue it is"))
    cid = await h.conversation()
    card = ToolUseBlock("card", "ask_user", {"question": "Which colour?"})
    now = utcnow()
    await h.store.write(
        AppendMessage(cid, Message("user", (TextBlock("paint it"),)), "t1"),
        StartTurn(Turn("t1", cid, "r1", "running", now)),
        SetConversationState(cid, "running"),
        AppendMessage(cid, Message("assistant", (card,), metadata={"awaiting": "card"}), "t1"),
        StartToolCall(ToolCallRecord("card", cid, "t1", "ask_user", card.input, "waiting", now)),
    )
    assert await h.runtime.recover() == ["t1"]
    assert (await h.store.get_turn("t1")).stop_reason == "paused"  # type: ignore[union-attr]
    conversation = await h.store.get_conversation(cid)
    assert conversation is not None and conversation.state == "paused"
    assert not (await h.store.list_messages(cid))[-1].tool_results  # the card is still open
    handle = await h.runtime.answer_card(cid, "card", {"choice": "blue"})
    assert (await handle.result()).stop_reason == "end_turn"
    rows = await h.messages(cid)
    assert [r.text for m in rows for r in m.tool_results] == ['{"choice": "blue"}']
    assert rows[-1].text == "blue it is"
