"""The ``[background]`` section: schedules, reminders and the poller that fires them."""

from __future__ import annotations

from pydantic import Field, field_validator

from ostinato.config.sections import Section


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
        description="The time zone a schedule is set in when its request names none (an IANA "
        "name such as `Europe/Paris`).",
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
