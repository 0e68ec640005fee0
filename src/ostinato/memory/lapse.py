"""The stale-facts job: a current fact neither recorded nor returned by recall for
``stale_days`` lapses. It is closed (``ForgetFact``: it leaves recall and stays as
history), never deleted. No model call.

When recall last returned a fact is kept by ``Memory.recall`` (``NoteFactsUsed``, at
most once a day per fact and process); a fact never returned counts from when it was
recorded.
"""

from __future__ import annotations

from datetime import timedelta

from ostinato.background.jobs import Context, Outcome
from ostinato.store.base import ForgetFact

MAX_PER_RUN = 200


class LapseJob:
    name = "lapse"

    def __init__(self, stale_days: float = 180.0) -> None:
        self.stale_days = stale_days

    async def run(self, context: Context) -> Outcome:
        store, scope = context.store, context.owner
        facts = await store.list_memories(scope, limit=context.capacity)
        used = await store.fact_uses(scope)
        cutoff = context.now - timedelta(days=self.stale_days)
        stale = [f for f in facts if max(f.recorded_at, used.get(f.id, f.recorded_at)) < cutoff]
        stale.sort(key=lambda f: max(f.recorded_at, used.get(f.id, f.recorded_at)))
        outcome = Outcome()
        for fact in stale[:MAX_PER_RUN]:
            last = used.get(fact.id)
            outcome.ops.append(ForgetFact(scope, fact.id))
            outcome.changes.append(
                {
                    "action": "lapsed",
                    "memory_id": fact.id,
                    "text": fact.text,
                    "recorded_at": fact.recorded_at.isoformat(),
                    "last_used_at": last.isoformat() if last else None,
                }
            )
        return outcome
