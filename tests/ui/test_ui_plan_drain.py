"""Plan screen: a plan that carries out a drain says so, rather than pushing the user to reject it."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import small_snapshot

from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import Plan
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.widgets.plan_table import summary


def _moving_j2_off_t4(drained: bool, stop: bool = False) -> Snapshot:
    """j2 leaves t4-1 (to a100-2, or stopped), at an average JCT worse than without the plan."""
    snap = small_snapshot()
    current = {j.id: j.allocation for j in snap.jobs if j.allocation is not None}
    proposed = dict(current)
    if stop:
        del proposed["j2"]
    else:
        proposed["j2"] = Allocation.of("j2", "A100", {"a100-2": [0]})
    effect = replace(snap.plan.effect, avg_jct_s=3700.0, avg_jct_before_s=3600.0)
    hosts = tuple(replace(h, drained=drained and h.name == "t4-1") for h in snap.hosts)
    return replace(snap, hosts=hosts, plan=Plan.build(current, proposed, "heet", 100.0, effect))


def test_a_plan_moving_jobs_off_a_drained_host_says_it_carries_out_the_drain_not_r_rejects_it() -> None:
    """A drain's plan, worse by the average as a drain's plan is, read "(r rejects it)": a push to
    reject the plan that carries out what the user asked for."""
    for stop in (False, True):
        said = summary(_moving_j2_off_t4(drained=True, stop=stop)).plain
        assert "r rejects it" not in said, said
        assert "it carries out the drain of t4-1 (the cost is the drain's)" in said, said
    undrained = summary(_moving_j2_off_t4(drained=False)).plain
    assert "(r rejects it)" in undrained and "drain" not in undrained, "a move of the policy's own: as before"


def test_a_drain_plan_that_is_no_worse_needs_no_excuse() -> None:
    snap = _moving_j2_off_t4(drained=True)
    better = replace(snap, plan=replace(snap.plan, effect=replace(snap.plan.effect, avg_jct_s=3000.0)))
    assert "carries out the drain" not in summary(better).plain
