"""A profiling run measures a job's speed once it has settled, not at its second report.

On the bundled local hosts a DataLoader job's profiling run reported 4,846, 7,355, 22,877 and
34,994 samples/s; the second report was kept, so its GPU type looked a sixth as fast as it
was, and the plans put it on a slower type that had happened to be measured later."""

from __future__ import annotations

from heet_tui.control.progress_reports import PROFILE_MAX_REPORTS, note_profiling_rate, profiled_rate
from heet_tui.control.runtime import Run
from heet_tui.core.allocation import Allocation


def _feed(rates: list[float], least: int = 2) -> tuple[int, float] | None:
    """Report ``rates`` to a profiling run one by one: the report it stops at, and its speed."""
    run = Run("j", Allocation.of("j", "V100", {"h": [0]}), 1, {}, 0.0, profiling=True)
    for rate in rates:
        run.reports += 1
        if note_profiling_rate(run, rate, least):
            return run.reports, profiled_rate(run.rates)
    return None


def test_a_climbing_speed_is_measured_where_it_settles() -> None:
    assert _feed([4846.0, 7355.0, 22877.0, 34994.0, 35500.0, 35200.0]) == (5, 35247.0)
    assert _feed([100.0, 200.0, 210.0]) == (3, 205.0), "the first report (start-up) is never counted"
    assert _feed([100.0, 200.0]) is None, "one rate cannot show it settled"


def test_a_speed_that_never_settles_is_its_median_after_the_last_report() -> None:
    rates = [50.0, 100.0, 300.0, 120.0, 400.0, 90.0]
    assert _feed(rates) == (PROFILE_MAX_REPORTS, 210.0)  # median of 100, 300, 120, 400


def test_more_reports_asked_for_are_waited_for_even_when_settled() -> None:
    assert _feed([10.0, 100.0, 101.0, 102.0, 101.0], least=4) == (4, 101.5)
