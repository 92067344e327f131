"""Plan screen while an approved plan is applied: it says jobs stop only where the plan stops one."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import small_snapshot

from heet_tui.ui.widgets.plan_table import summary


def test_applying_a_plan_that_only_starts_jobs_says_nothing_of_stopping() -> None:
    """33 starts with nothing running read "jobs stop, save a checkpoint and start again"."""
    snap = replace(small_snapshot(plan=False), applying_plan=8)
    starts_only = summary(replace(snap, applying_restarts=0)).plain
    assert starts_only.startswith("Applying plan #8: ") and "the Jobs screen and each job's events (its details) show each step" in starts_only
    assert "stop" not in starts_only and "checkpoint" not in starts_only, starts_only
    restarts = summary(replace(snap, applying_restarts=2)).plain
    assert restarts.startswith("Applying plan #8: jobs stop, save a checkpoint and start again"), restarts
