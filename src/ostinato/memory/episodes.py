"""The episodes job: recent turns folded into short episode memories.

For each of the owner's ``CONVERSATIONS`` newest conversations (background ones left
out), the rows of the chat view after the last one folded (the job's notes keep that
seq per conversation) are summarised by one model call into an episode of a few
sentences, stored as a fact with the subject ``episode`` (so recall finds it like any
other fact) and linked to the conversation and its last turn. A stretch with fewer than
a user message and an answer waits for more; one longer than ``ROWS`` rows is folded in
parts, one per run. With no model call left for the day, the rest waits.
"""

from __future__ import annotations

from ostinato.background.jobs import Context, Outcome
from ostinato.background.stage_one import is_background
from ostinato.ids import new_id
from ostinato.messages import Message
from ostinato.store.base import RememberFact

CONVERSATIONS = 20
ROWS = 200
SUBJECT = "episode"
EPISODE_PROMPT = (
    "You keep a diary of what a person did with their assistant. Summarise the exchange "
    "below in at most three short sentences, in the third person and the past tense: "
    "what they talked about, what was decided or done, and anything to follow up. Answer "
    "with the summary only."
)


def transcript(rows: list[Message]) -> str:
    return "\n".join(f"{r.role.capitalize()}: {r.text.strip()}" for r in rows)


class EpisodesJob:
    name = "episodes"

    async def run(self, context: Context) -> Outcome:
        store = context.store
        folded: dict[str, int] = dict(context.notes.get("folded", {}))
        outcome = Outcome()
        for conversation in await store.list_conversations(
            owner=context.owner, limit=CONVERSATIONS
        ):
            if is_background(conversation):
                continue
            after = folded.get(conversation.id, 0)
            rows = await store.list_messages(
                conversation.id, after_seq=after, limit=ROWS, include_hidden=False
            )
            said = [r for r in rows if r.role in ("user", "assistant") and r.text.strip()]
            if not any(r.role == "user" for r in said) or said[-1].role != "assistant":
                continue
            summary = await context.budget.complete(EPISODE_PROMPT, transcript(said))
            if summary is None or not summary.strip():
                outcome.wanting = context.budget.refused
                break
            text = f"Episode of {said[-1].created_at or context.now:%Y-%m-%d}: {summary.strip()}"
            fact_id = new_id()
            outcome.ops.append(
                RememberFact(
                    context.owner,
                    text[:2_000],
                    subject=SUBJECT,
                    conversation_id=conversation.id,
                    turn_id=said[-1].turn_id,
                    capacity=context.capacity,
                    id=fact_id,
                )
            )
            through = max(r.seq or 0 for r in rows)
            folded[conversation.id] = through
            outcome.changes.append(
                {
                    "action": "episode",
                    "memory_id": fact_id,
                    "text": text[:2_000],
                    "conversation_id": conversation.id,
                    "through_seq": through,
                }
            )
        outcome.notes = {"folded": folded}
        return outcome
