"""The ``[background]`` section: schedules, reminders and the poller that fires them, and
``[background.jobs]``: the idle-gated memory jobs (``ostinato.background.jobs``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from ostinato.config.sections import Section


def _idle(minutes: float) -> Any:
    return Field(
        default=minutes,
        ge=1,
        le=7 * 24 * 60,
        allow_inf_nan=False,
        description="It runs once per stretch of the owner's idleness, after this many "
        "minutes without a turn.",
    )


def _calls(calls: int) -> Any:
    return Field(
        default=calls,
        ge=0,
        le=10_000,
        description="Model calls it may make per owner per UTC day; work left for want "
        "of them waits for the next day.",
    )


class JobSection(Section):
    """One idle-gated job: whether it runs, after how long of the owner's idleness, and
    how many model calls it may make per owner per UTC day."""

    enabled: bool = Field(default=True, description="Whether the job runs.")
    idle_minutes: float = _idle(30)
    calls_per_day: int = _calls(10)


class EpisodesSection(JobSection):
    idle_minutes: float = _idle(15)
    calls_per_day: int = _calls(20)


class LapseSection(JobSection):
    idle_minutes: float = _idle(60)
    calls_per_day: int = _calls(0)
    stale_days: float = Field(
        default=180.0,
        ge=1,
        le=36_500,
        allow_inf_nan=False,
        description="A fact neither recorded nor returned by recall for this many days "
        "lapses (closed, kept as history).",
    )


class JobsSection(Section):
    """The idle-gated memory jobs (see background.md, Jobs while the person is away)."""

    enabled: bool = Field(
        default=True,
        description="Run the jobs' poller in this server process (`false`: another "
        "process runs them).",
    )
    poll_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="How often the poller looks for owners idle long enough, in seconds.",
    )
    lease_seconds: float = Field(
        default=900.0,
        ge=5,
        le=86_400,
        allow_inf_nan=False,
        description="How long a process holds an owner's job it took (one taken by a "
        "process that died is run again after this).",
    )
    consolidate: JobSection = Field(
        default_factory=JobSection,
        description="Merge duplicate facts, close facts a newer one superseded, list "
        "conflicts for the person.",
    )
    lapse: LapseSection = Field(
        default_factory=LapseSection,
        description="Let stale unused facts lapse (no model call).",
    )
    episodes: EpisodesSection = Field(
        default_factory=EpisodesSection,
        description="Fold recent turns into short episode memories recall can find.",
    )


class BackgroundSection(Section):
    enabled: bool = Field(
        default=True,
        description="Run the poller that fires due schedules in this server process (`false`: "
        "schedules are kept and listed, another process fires them).",
    )
    poll_seconds: float = Field(
        default=0.5,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="How often the poller looks for due schedules, in seconds.",
    )
    lease_seconds: float = Field(
        default=60.0,
        ge=5,
        le=3600,
        allow_inf_nan=False,
        description="How long a process holds a schedule it took before another may take it "
        "over (a process that died mid-fire is taken over after this).",
    )
    schedules_per_owner: int = Field(
        default=10,
        ge=1,
        le=100_000,
        description="How many schedules (not yet delivered) one owner may have; one more is "
        "refused with 409 `too_many_schedules`.",
    )
    zone: str = Field(
        default="UTC",
        description="The time zone a schedule is set in when its request names none and "
        "its owner has no other schedule (else that schedule's zone); an IANA name such "
        "as `Europe/Paris`.",
    )
    jobs: JobsSection = Field(
        default_factory=JobsSection, description="The idle-gated memory jobs."
    )

    @field_validator("zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not a time zone (try e.g. 'Europe/Paris')") from None
        return value
