"""When a schedule fires: parsing what a person wrote, and the next slot after a time.

A schedule is set in a time zone (an IANA name such as ``Europe/Paris``; the owner's,
``UTC`` when none is given). Its times are kept in UTC, with the zone beside them, and
each next slot is worked out in that zone, so ``daily at 09:00`` stays at nine on the
wall clock across a daylight-saving change (the UTC time moves by an hour).

What a person expects at a change:

- a wall time that does not exist (02:30 on the spring-forward night) fires as far
  past the jump as it was past the gap's start (03:30 where the clocks jump from 02:00
  to 03:00): the time before the change, read on the new clock;
- a wall time that happens twice (01:30 on the fall-back night) fires once, at the first.

``every 15m`` is an interval in elapsed time, not wall time: it does not jump at a
change. Cron expressions go through ``croniter``, in the zone they were set in.

The kinds (``Recurrence.kind``): ``once`` (``in 20 minutes``, an ISO time), ``every``
(``every 15m``, ``every 2h``, ``every 1d``), ``daily`` (``daily at 09:00``) and ``cron``
(five fields, ``cron 0 9 * * 1-5`` or the bare expression).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ostinato.errors import InvalidRequest

Kind = Literal["once", "every", "daily", "cron"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_WORDS = {
    "second": "s",
    "sec": "s",
    "minute": "m",
    "min": "m",
    "hour": "h",
    "hr": "h",
    "day": "d",
}
_AMOUNT = re.compile(r"^(\d+)\s*([a-z]+?)s?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")
MIN_INTERVAL = timedelta(minutes=1)
MAX_AHEAD = timedelta(days=366 * 5)


@dataclass(frozen=True, slots=True)
class Recurrence:
    """What a schedule's ``when`` said, parsed: ``spec`` is kept in the store as written
    after its kind (``15m``, ``09:00``, the cron expression, or the ISO time)."""

    kind: Kind
    spec: str
    first: datetime  # the first slot, aware UTC


def zone_named(name: str | None) -> ZoneInfo:
    """The zone ``name`` names (``UTC`` for none); ``InvalidRequest`` for an unknown one."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidRequest(f"{name!r} is not a time zone (try e.g. 'Europe/Paris')") from exc


def duration(text: str) -> timedelta:
    """``15m``, ``2h``, ``20 minutes``, ``1 day`` as a duration; ``InvalidRequest`` else."""
    found = _AMOUNT.match(text.strip().lower())
    unit = None
    if found:
        word = found.group(2)
        unit = word if word in _UNITS else _UNIT_WORDS.get(word)
    if not found or unit is None:
        raise InvalidRequest(f"{text!r} is not a duration such as '15m', '2h' or '20 minutes'")
    seconds = int(found.group(1)) * _UNITS[unit]
    if seconds > MAX_AHEAD.total_seconds():
        raise InvalidRequest("a schedule is at most five years ahead")
    return timedelta(seconds=seconds)


def parse_when(when: str, now: datetime, zone: str | None = None) -> Recurrence:
    """Parse ``when`` as written at ``now`` (aware) in ``zone``; ``InvalidRequest`` with
    what is accepted when it is none of the kinds."""
    text = " ".join(when.strip().split())
    lower = text.lower()
    tz = zone_named(zone)
    if lower.startswith("in "):
        first = now + duration(lower[3:])
        return Recurrence("once", first.astimezone(UTC).isoformat(), _checked(first, now))
    if lower.startswith("every "):
        step = duration(lower[6:])
        if step < MIN_INTERVAL:
            raise InvalidRequest("a recurring schedule fires at most once a minute")
        return Recurrence("every", f"{int(step.total_seconds())}s", now + step)
    if lower.startswith("daily at "):
        spec = _clock_text(lower[9:])
        return Recurrence("daily", spec, next_fire("daily", spec, now, tz))
    if lower.startswith("cron "):
        lower = lower[5:]
    if len(lower.split()) == 5 and not _looks_iso(lower):
        check_cron(lower)
        return Recurrence("cron", lower, next_fire("cron", lower, now, tz))
    first = _iso(text, tz)
    return Recurrence("once", first.isoformat(), _checked(first, now))


def next_fire(kind: Kind, spec: str, after: datetime, zone: ZoneInfo) -> datetime:
    """The first slot of a recurring schedule strictly after ``after`` (aware UTC)."""
    if kind == "every":
        return after + timedelta(seconds=int(spec.rstrip("s")))
    if kind == "daily":
        return _next_daily(spec, after, zone)
    if kind == "cron":
        return _next_cron(spec, after, zone)
    raise ValueError(f"a {kind!r} schedule has no next slot")


def _next_daily(spec: str, after: datetime, zone: ZoneInfo) -> datetime:
    hour, minute = (int(part) for part in spec.split(":"))
    local = after.astimezone(zone)
    for days in range(3):
        day = local.date() + timedelta(days=days)
        candidate = _wall(datetime.combine(day, time(hour, minute)), zone)
        if candidate > after:
            return candidate
    raise AssertionError("a daily slot is never more than two days ahead")


def _wall(naive: datetime, zone: ZoneInfo) -> datetime:
    """A wall time in ``zone`` as UTC: the first of two (fold 0); one that does not
    exist is read with the offset before the change, so it lands as far past the jump
    as it was past its start (02:30 in a 02:00 -> 03:00 gap fires at 03:30)."""
    return naive.replace(tzinfo=zone, fold=0).astimezone(UTC)


def _next_cron(spec: str, after: datetime, zone: ZoneInfo) -> datetime:
    from croniter import croniter

    cron: Any = croniter(spec, after.astimezone(zone))  # typed or not, as installed
    found: datetime = cron.get_next(datetime)
    return found.astimezone(UTC)


def check_cron(spec: str) -> None:
    """``InvalidRequest`` for a cron expression that is malformed, or that never fires
    (``0 0 30 2 *``: 30 February)."""
    from croniter import CroniterError, croniter

    checker: Any = croniter
    if not checker.is_valid(spec):
        raise InvalidRequest(f"{spec!r} is not a cron expression (five fields: m h dom mon dow)")
    try:
        checker(spec, datetime(2026, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterError:
        raise InvalidRequest(f"the cron expression {spec!r} never fires") from None


def _clock_text(text: str) -> str:
    found = _CLOCK.match(text.strip())
    if not found or int(found.group(1)) > 23 or int(found.group(2)) > 59:
        raise InvalidRequest(f"{text!r} is not a time of day such as '09:00'")
    return f"{int(found.group(1)):02d}:{found.group(2)}"


def _looks_iso(text: str) -> bool:
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}", text))


def _iso(text: str, zone: ZoneInfo) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        raise InvalidRequest(
            f"{text!r} is not a time: say 'in 20 minutes', an ISO time "
            "('2026-12-24T09:00'), 'every 15m', 'daily at 09:00' or a cron expression"
        ) from None
    if parsed.tzinfo is None:
        return _wall(parsed, zone)
    return parsed.astimezone(UTC)


def _checked(first: datetime, now: datetime) -> datetime:
    if first <= now:
        raise InvalidRequest(f"{first.isoformat()} is in the past")
    if first - now > MAX_AHEAD:
        raise InvalidRequest("a schedule is at most five years ahead")
    return first.astimezone(UTC)
