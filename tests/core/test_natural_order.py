"""Names sorted as people number them."""

from __future__ import annotations

from heet_tui.core.natural_order import natural_key
from heet_tui.ui.widgets.job_table import SORTS


def test_numbers_in_names_sort_by_value() -> None:
    names = ["sweep-10", "sweep-2", "Sweep-1", "sweep-1b", "rack1-h10", "rack1-h9", "7", "a"]
    assert sorted(names, key=natural_key) == ["7", "a", "rack1-h9", "rack1-h10", "Sweep-1", "sweep-1b",
                                              "sweep-2", "sweep-10"]


def test_the_jobs_screens_name_sort_is_natural() -> None:
    """A sweep of 40 sorted by name read sweep-1, sweep-10, sweep-11, ..., sweep-2."""
    from heet_tui.core.job import JobState
    from heet_tui.core.snapshot import JobStatus

    jobs = [JobStatus(f"sweep-{i}", f"sweep-{i}", JobState.QUEUED, "m") for i in (10, 2, 1)]
    assert [j.name for j in sorted(jobs, key=SORTS["name"])] == ["sweep-1", "sweep-2", "sweep-10"]


def test_a_decimal_is_one_number() -> None:
    """lr0.01 and lr0.1 both read as 0, ".", 1: a sweep's learning rates were mixed, ordered by seed."""
    names = ["sw-lr0.1-seed1", "sw-lr0.01-seed2", "sw-lr0.01-seed1", "sw-lr0.3-seed1", "sw-lr0.1-seed2"]
    assert sorted(names, key=natural_key) == ["sw-lr0.01-seed1", "sw-lr0.01-seed2", "sw-lr0.1-seed1",
                                              "sw-lr0.1-seed2", "sw-lr0.3-seed1"]
