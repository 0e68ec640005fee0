from __future__ import annotations

from tests.patience import start_timeout


def test_the_wait_grows_with_the_load_per_core_within_its_bounds() -> None:
    assert start_timeout({}, load=0.3, cores=2) == 60.0
    assert start_timeout({}, load=8.0, cores=2) == 240.0
    assert start_timeout({}, load=500.0, cores=2) == 600.0


def test_the_variable_sets_it_outright() -> None:
    assert start_timeout({"OSTINATO_TEST_START_TIMEOUT": "5"}, load=50.0, cores=1) == 5.0
