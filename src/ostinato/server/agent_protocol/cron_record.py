"""A cron as the store keeps it, and what a cron request may hold.

A cron on a thread is a ``run`` schedule (``background.schedules``) in the thread's
conversation: the poller fires it (``background.firer``), and each firing is a user
message, the cron's input, answered by a turn in that conversation. What the schedule
does not hold (the assistant, the ``schedule`` as written, the time zone as asked, the
request's payload, metadata) is a ``ProtocolRecord`` of kind ``lg_cron`` with the
schedule's id, so the cron's id is the schedule's.

A request's fields are read here: ``schedule`` (a five-field cron expression, or any of
ostinato's forms, ``every 15m``, ``daily at 09:00``, ``in 20 minutes``, an ISO time),
``timezone`` (IANA; none is UTC), ``input`` (one human message with text), ``enabled``
(a disabled cron's schedule has no next slot), ``metadata``, ``multitask_strategy``
(``enqueue`` only: a firing waits behind a running turn). ``ACCEPTED`` fields are kept
in the payload and change nothing; ``REFUSED`` ones are refused (422), and so is any
field not named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ostinato.errors import InvalidRequest
from ostinato.messages import JSON
from ostinato.server.agent_protocol.starting import REFUSED as RUN_REFUSED
from ostinato.server.agent_protocol.starting import RunRequest, said
from ostinato.server.agent_protocol.wire import iso
from ostinato.store.protocol_records import ProtocolRecord
from ostinato.store.schedules import Schedule

KIND = "lg_cron"
ACCEPTED = frozenset(
    {
        "config",
        "context",
        "checkpoint_during",
        "stream_mode",
        "stream_subgraphs",
        "stream_resumable",
        "durability",
    }
)
REFUSED = {
    "interrupt_before": RUN_REFUSED["interrupt_before"],
    "interrupt_after": RUN_REFUSED["interrupt_after"],
    "webhook": RUN_REFUSED["webhook"],
    "end_time": "end_time is not supported: delete the cron, or disable it "
    "(enabled: false), when its runs should stop",
    "on_run_completed": "on_run_completed is for stateless crons, which are not supported",
}
STATELESS = (
    "stateless crons (a new thread for each run) are not supported: create a thread "
    "and POST /threads/{thread_id}/runs/crons"
)
FIELDS: tuple[str, ...] = ("cron_id", "assistant_id", "thread_id", "user_id", "schedule")
FIELDS += ("timezone", "end_time", "on_run_completed", "payload", "metadata", "enabled")
FIELDS += ("next_run_date", "created_at", "updated_at")
SORTS = frozenset({"cron_id", "assistant_id", "thread_id", "created_at", "updated_at"})
SORTS |= {"next_run_date", "end_time"}


class CronChange(BaseModel):
    """A cron's fields as a request gives them (each left as it is when absent)."""

    model_config = ConfigDict(extra="allow")

    schedule: str | None = Field(None, min_length=1, max_length=200)
    timezone: str | None = Field(None, max_length=64)
    input: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    enabled: bool | None = None
    multitask_strategy: str | None = None

    def check(self) -> None:
        extra = self.model_extra or {}
        for name, value in extra.items():
            if name in REFUSED:
                if value is not None:
                    raise InvalidRequest(f"{name}: {REFUSED[name]}")
            elif name not in ACCEPTED:
                raise InvalidRequest(f"{name!r} is not a field of a cron")
        strategy = self.multitask_strategy
        if strategy not in (None, "enqueue"):
            raise InvalidRequest(
                f"multitask_strategy {strategy!r} is not supported for a cron: a firing "
                "waits behind a running turn (enqueue)"
            )

    def text(self) -> str | None:
        """The message each run says: the input's one human message (None: no input)."""
        if self.input is None:
            return None
        messages = said(RunRequest(assistant_id="", input=self.input))
        if len(messages) != 1:
            raise InvalidRequest("a cron's input.messages is one human message")
        return messages[0][1]

    def payload(self) -> JSON:
        """The request's fields as given, the accepted ones with them."""
        given = self.model_dump(exclude_unset=True)
        return {k: v for k, v in given.items() if k not in REFUSED}


class CronRequest(CronChange):
    assistant_id: str = Field(max_length=200)
    schedule: str = Field(min_length=1, max_length=200)


def read(model: type[CronChange], raw: dict[str, Any]) -> Any:
    try:
        body = model.model_validate(raw)
    except ValueError as exc:
        raise InvalidRequest(f"the cron request does not validate: {exc}") from None
    body.check()
    return body


@dataclass(frozen=True, slots=True)
class CronRecord:
    id: str
    owner: str
    thread_id: str
    assistant_id: str
    schedule: str  # as written
    timezone: str | None  # as asked (None: UTC)
    enabled: bool
    payload: JSON
    metadata: JSON
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def to_record(self, now: datetime) -> ProtocolRecord:
        data = {
            "assistant_id": self.assistant_id,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "enabled": self.enabled,
            "payload": self.payload,
            "metadata": self.metadata,
        }
        made = self.created_at or now
        return ProtocolRecord(KIND, self.id, self.owner, data, made, now, self.thread_id)

    @classmethod
    def of(cls, record: ProtocolRecord) -> CronRecord:
        d = record.data
        return cls(
            record.id,
            record.owner,
            record.conversation_id or "",
            str(d["assistant_id"]),
            str(d["schedule"]),
            d.get("timezone"),
            bool(d.get("enabled", True)),
            dict(d.get("payload") or {}),
            dict(d.get("metadata") or {}),
            record.created_at,
            record.updated_at,
        )


def cron_json(cron: CronRecord, schedule: Schedule) -> JSON:
    next_run = schedule.next_fire if cron.enabled and schedule.state != "delivered" else None
    return {
        "cron_id": cron.id,
        "assistant_id": cron.assistant_id,
        "thread_id": cron.thread_id,
        "user_id": cron.owner,
        "schedule": cron.schedule,
        "timezone": cron.timezone,
        "end_time": None,
        "on_run_completed": None,
        "payload": cron.payload,
        "metadata": cron.metadata,
        "enabled": cron.enabled,
        "next_run_date": iso(next_run) if next_run is not None else None,
        "created_at": iso(cron.created_at) if cron.created_at else None,
        "updated_at": iso(cron.updated_at) if cron.updated_at else None,
    }


class CronQuery(BaseModel):
    """A search's or a count's filters, and a search's page, order and fields."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = None
    thread_id: str | None = None
    enabled: bool | None = None
    metadata: dict[str, Any] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: str = "created_at"
    sort_order: str = "desc"
    select: list[str] | None = None


def query_of(raw: dict[str, Any] | None) -> CronQuery:
    try:
        query = CronQuery.model_validate(raw or {})
    except ValueError as exc:
        raise InvalidRequest(f"the cron search does not validate: {exc}") from None
    if query.sort_by not in SORTS:
        raise InvalidRequest(f"sort_by {query.sort_by!r} is not one of {sorted(SORTS)}")
    if query.sort_order not in ("asc", "desc"):
        raise InvalidRequest("sort_order is asc or desc")
    unknown = [name for name in query.select or [] if name not in FIELDS]
    if unknown:
        raise InvalidRequest(f"select: {unknown} are not fields of a cron")
    return query


def matches(cron: JSON, query: CronQuery) -> bool:
    wanted = query.metadata or {}
    return (
        query.assistant_id in (None, cron["assistant_id"])
        and query.thread_id in (None, cron["thread_id"])
        and query.enabled in (None, cron["enabled"])
        and all(cron["metadata"].get(k) == v for k, v in wanted.items())
    )


def page(crons: list[JSON], query: CronQuery) -> list[JSON]:
    """The crons that match, in the order asked, the page asked, the fields asked."""
    found = [c for c in crons if matches(c, query)]
    found.sort(key=lambda c: (c[query.sort_by] is None, c[query.sort_by] or "", c["cron_id"]))
    if query.sort_order == "desc":
        found.reverse()
    found = found[query.offset : query.offset + query.limit]
    if query.select is None:
        return found
    return [{name: c[name] for name in query.select} for c in found]
