"""The spend rule, case by case (``spend.rule``): pure, no store, no clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ostinato.spend.rule import (
    Account,
    Allow,
    Ask,
    Limit,
    Refuse,
    Standing,
    Verdict,
    consent_key,
    decide,
    resets_at,
    start,
)

OWN = Account("owner", "ann", Limit(soft=4.0, hard=5.0))
GUESTS = Account("anonymous", "", Limit(hard=1.0))
EVERYONE = Account("deployment", "", Limit(soft=90.0, hard=100.0, period="month"))
FREE = Account("owner", "ann", Limit())
DAY, MONTH = "2026-12-03", "2026-12-01"


def own(spent: float, reserved: float = 0.0) -> Standing:
    return Standing(OWN, spent, reserved, DAY)


def everyone(spent: float) -> Standing:
    return Standing(EVERYONE, spent, 0.0, MONTH)


CASES: list[tuple[str, list[Standing], float | None, dict[str, object], Verdict]] = [
    ("well under every limit", [own(1.0), everyone(10)], 0.5, {}, Allow()),
    ("exactly at the soft limit is not past it", [own(3.5)], 0.5, {}, Allow()),
    ("past the soft limit asks", [own(3.8)], 0.5, {}, Ask(own(3.8), 0.5)),
    (
        "past the soft limit, agreed for this period, goes on",
        [own(3.8)],
        0.5,
        {"consented": frozenset({consent_key(OWN, DAY)})},
        Allow(),
    ),
    (
        "agreed in another period still asks",
        [own(3.8)],
        0.5,
        {"consented": frozenset({consent_key(OWN, "2026-12-02")})},
        Ask(own(3.8), 0.5),
    ),
    ("a side call past the soft limit goes on", [own(3.8)], 0.5, {"ask": False}, Allow()),
    ("past the hard limit is refused", [own(4.8)], 0.5, {}, Refuse(own(4.8), 0.5)),
    ("exactly at the hard limit goes (asks: past soft)", [own(4.5)], 0.5, {}, Ask(own(4.5), 0.5)),
    (
        "a side call past the hard limit is refused",
        [own(4.8)],
        0.5,
        {"ask": False},
        Refuse(own(4.8), 0.5),
    ),
    ("reservations of calls under way count", [own(3.0, 1.8)], 0.5, {}, Refuse(own(3.0, 1.8), 0.5)),
    (
        "agreeing to pass the soft limit never lets a call past the hard one",
        [own(4.8)],
        0.5,
        {"consented": frozenset({consent_key(OWN, DAY)})},
        Refuse(own(4.8), 0.5),
    ),
    (
        "the hard limit of a later account refuses before an earlier soft one asks",
        [own(3.8), everyone(99.8)],
        0.5,
        {},
        Refuse(everyone(99.8), 0.5),
    ),
    (
        "the first account past its soft limit asks",
        [own(3.8), everyone(89.8)],
        0.5,
        {},
        Ask(own(3.8), 0.5),
    ),
    (
        "the deployment's soft limit asks too",
        [own(0.0), everyone(89.8)],
        0.5,
        {},
        Ask(everyone(89.8), 0.5),
    ),
    (
        "a call costing more than the whole budget is refused",
        [own(0.0)],
        6.0,
        {},
        Refuse(own(0.0), 6.0),
    ),
    ("no limit at all: always allowed", [Standing(FREE, 1e6)], 1e6, {}, Allow()),
    ("no price, unpriced calls allowed", [own(4.9)], None, {}, Allow()),
    (
        "no price, unpriced calls refused under a limit",
        [own(0.0)],
        None,
        {"unpriced": "refuse"},
        Refuse(None, None, unpriced=True),
    ),
    (
        "no price, refused only when a limit applies",
        [Standing(FREE)],
        None,
        {"unpriced": "refuse"},
        Allow(),
    ),
]


@pytest.mark.parametrize(
    ("standings", "estimate", "options", "verdict"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decide(
    standings: list[Standing], estimate: float | None, options: dict[str, object], verdict: Verdict
) -> None:
    assert decide(standings, estimate, **options) == verdict  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("soft", "hard", "problem"),
    [(-1.0, None, "negative"), (None, -0.5, "negative"), (5.0, 4.0, "below")],
)
def test_a_limit_that_makes_no_sense_is_refused(
    soft: float | None, hard: float | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        Limit(soft, hard)


PERIODS = [
    (
        datetime(2026, 12, 3, 15, 0, tzinfo=UTC),
        "day",
        "2026-12-03",
        datetime(2026, 12, 4, tzinfo=UTC),
    ),
    (
        datetime(2026, 12, 3, 23, 59, tzinfo=UTC),
        "month",
        "2026-12-01",
        datetime(2027, 1, 1, tzinfo=UTC),
    ),
    (datetime(2026, 2, 28, 12, tzinfo=UTC), "day", "2026-02-28", datetime(2026, 3, 1, tzinfo=UTC)),
    (
        datetime(2026, 11, 30, 12, tzinfo=UTC),
        "month",
        "2026-11-01",
        datetime(2026, 12, 1, tzinfo=UTC),
    ),
    # a moment given in another zone is read in UTC
    (
        datetime.fromisoformat("2026-12-04T00:30:00+01:00"),
        "day",
        "2026-12-03",
        datetime(2026, 12, 4, tzinfo=UTC),
    ),
]


@pytest.mark.parametrize(("at", "period", "first", "reset"), PERIODS)
def test_periods_start_and_reset_at_midnight_utc(
    at: datetime, period: str, first: str, reset: datetime
) -> None:
    assert start(period, at) == first  # type: ignore[arg-type]
    assert resets_at(period, at) == reset  # type: ignore[arg-type]
