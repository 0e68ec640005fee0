"""The consolidation job: an owner's facts tidied while they are away.

1. **Duplicates** (the same text, ignoring case, spacing and a final full stop) are
   merged with no model call: the newest stays, the others are closed as superseded
   by it (``ResolveConflict``), kept as history.
2. **Conflicts** (``graph.conflicts``: current facts of one subject and relation that
   say different things) are judged by one model call each, within the job's calls for
   the day: ``same`` (one fact said twice: merged into the newest), ``newer`` (the
   newest replaces the others: they are closed as superseded by it), or ``conflict``
   (they disagree and only the person can say which holds: listed for them in the run's
   changes, and not judged again while the facts stay the same).

Every change is a record in the run (``/v1/jobs``); what the model answered that is
none of the three leaves the facts as they are.
"""

from __future__ import annotations

import hashlib
import json
import re

from ostinato.background.jobs import Context, Outcome
from ostinato.memory import graph
from ostinato.messages import JSON
from ostinato.store.base import MemoryFact
from ostinato.store.relations import ResolveConflict

JUDGE_PROMPT = (
    "You tidy the facts an assistant remembers about a person. Below are facts that share "
    "a subject but differ, each with the date it was recorded. Answer with one JSON "
    'object, {"verdict": "same"} when they say the same thing in other words, '
    '{"verdict": "newer"} when the newest one replaces the older ones (the situation '
    'changed), or {"verdict": "conflict"} when they disagree and only the person can say '
    "which is true."
)
VERDICTS = ("same", "newer", "conflict")


def normal(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!")


def _newest(facts: list[MemoryFact]) -> MemoryFact:
    return max(facts, key=lambda f: (f.recorded_at, f.id))


def _key(facts: list[MemoryFact]) -> str:
    ids = ",".join(sorted(f.id for f in facts))
    return hashlib.sha256(ids.encode()).hexdigest()[:16]


def verdict(text: str) -> str | None:
    """The verdict of a model's answer (a JSON object, even inside prose), or None."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        found = json.loads(match.group(0)) if match else None
    except ValueError:
        return None
    value = found.get("verdict") if isinstance(found, dict) else None
    return value if value in VERDICTS else None


class ConsolidateJob:
    name = "consolidate"

    async def run(self, context: Context) -> Outcome:
        facts = await context.store.list_memories(context.owner, limit=context.capacity)
        outcome = Outcome()
        closed = self._merge_duplicates(context.owner, facts, outcome)
        judged: dict[str, str] = dict(context.notes.get("judged", {}))
        for conflict in await graph.conflicts(context.store, context.owner):
            group = [f for f in conflict.facts if f.id not in closed]
            if len({normal(f.text) for f in group}) < 2:
                continue
            key = _key(group)
            if key in judged:
                continue
            found = await self._judge(context, group)
            if found is None:
                outcome.wanting = outcome.wanting or context.budget.refused
                continue
            judged[key] = found
            closed |= self._settle(context.owner, conflict.subject, group, found, outcome)
        outcome.notes = {"judged": judged}
        return outcome

    def _merge_duplicates(self, scope: str, facts: list[MemoryFact], outcome: Outcome) -> set[str]:
        groups: dict[str, list[MemoryFact]] = {}
        for fact in facts:
            groups.setdefault(normal(fact.text), []).append(fact)
        closed: set[str] = set()
        for group in groups.values():
            if len(group) > 1:
                closed |= self._close(scope, group, "merged", outcome)
        return closed

    def _close(
        self, scope: str, group: list[MemoryFact], action: str, outcome: Outcome
    ) -> set[str]:
        keep = _newest(group)
        others = tuple(f.id for f in group if f.id != keep.id)
        outcome.ops.append(ResolveConflict(scope, keep.id, others))
        change: JSON = {"action": action, "kept": keep.id, "text": keep.text}
        change["closed"] = [{"memory_id": f.id, "text": f.text} for f in group if f is not keep]
        outcome.changes.append(change)
        return set(others)

    def _settle(
        self, scope: str, subject: str, group: list[MemoryFact], found: str, outcome: Outcome
    ) -> set[str]:
        if found == "same":
            return self._close(scope, group, "merged", outcome)
        if found == "newer":
            return self._close(scope, group, "superseded", outcome)
        facts = [{"memory_id": f.id, "text": f.text} for f in group]
        outcome.changes.append({"action": "conflict", "subject": subject, "facts": facts})
        return set()

    async def _judge(self, context: Context, group: list[MemoryFact]) -> str | None:
        lines = [
            f"- ({f.recorded_at.date().isoformat()}) {f.text}"
            for f in sorted(group, key=lambda f: f.recorded_at)
        ]
        answer = await context.budget.complete(JUDGE_PROMPT, "\n".join(lines), max_tokens=60)
        return None if answer is None else verdict(answer)
