"""``[budgets]``: limits per owner, for anonymous callers and for the deployment, read into
``spend.limits.Budgets``; a limit that makes no sense is a configuration error."""

from __future__ import annotations

from pathlib import Path

from ostinato.config import read_config
from ostinato.spend.rule import Limit

GOOD = """
[budgets.default]
soft = 4.0
hard = 5.0

[budgets.owners.ann]
hard = 50.0
period = "month"

[budgets.anonymous]
hard = 1.0

[budgets.deployment]
soft = 180
hard = 200
period = "month"
"""

BAD = """
[budgets]
currency = "EUR"

[budgets.default]
soft = 5
hard = 4

[budgets.owners.ann]
hard = -1
"""


def test_budgets_are_read_into_the_limits_the_gate_checks(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(GOOD)
    loaded = read_config(path, env={})
    assert loaded.problems == []
    budgets = loaded.config.budgets.budgets()
    assert budgets.any and budgets.currency == "USD" and budgets.unpriced == "allow"
    assert budgets.own_limit("bob") == Limit(4.0, 5.0, "day")
    assert budgets.own_limit("ann") == Limit(None, 50.0, "month")
    assert [a.pool for a in budgets.accounts("anon:x")] == ["owner", "anonymous", "deployment"]
    assert [a.pool for a in budgets.accounts("bob")] == ["owner", "deployment"]
    assert budgets.deployment == Limit(180.0, 200.0, "month")


def test_a_budget_that_makes_no_sense_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "ostinato.toml"
    path.write_text(BAD)
    assert read_config(path, env={}).problems == [
        "budgets.currency: unknown currency 'EUR' (the price table's: USD)",
        "budgets.default: the hard limit (4) is below the soft one (5)",
        "budgets.owners.ann.hard: Input should be greater than or equal to 0",
    ]


def test_no_budgets_limit_nothing(tmp_path: Path) -> None:
    assert not read_config(None, env={}).config.budgets.budgets().any
