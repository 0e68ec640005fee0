"""An owner's zone: a schedule made without one takes the zone of the owner's newest
schedule not yet delivered, else the deployment's; another owner's is not theirs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ostinato.background.schedules import Schedules
from ostinato.config.background import BackgroundSection
from ostinato.store.memory import MemoryStore

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_a_schedule_without_a_zone_takes_the_owners() -> None:
    ticks = iter(T0 + timedelta(seconds=n) for n in range(100))
    schedules = Schedules(
        MemoryStore(), BackgroundSection(zone="Europe/London"), lambda: next(ticks)
    )
    first = await schedules.create("ann", "c1", "daily at 09:00", "plan")
    assert first.zone == "Europe/London"  # nothing of ann's yet: the deployment's
    await schedules.create("ann", "c1", "daily at 08:00", "news", zone="Europe/Paris")
    await schedules.trigger("ann", "c1", "the build failed")  # a trigger has no zone
    later = await schedules.create("ann", "c1", "daily at 07:00", "run")
    assert later.zone == "Europe/Paris" and later.next_fire == datetime(
        2026, 12, 2, 6, 0, tzinfo=UTC
    )
    assert (await schedules.create("bob", "c2", "daily at 09:00", "x")).zone == "Europe/London"
