"""New jobs exchange allocations when that finishes the round's jobs sooner (start_swaps.py)."""

from __future__ import annotations

from sched_cases import alloc, host

from heet_tui.core.sched_input import ClusterView, Constraints, JobView
from heet_tui.scheduling.heet import HeetPolicy
from heet_tui.scheduling.problem import Problem
from heet_tui.scheduling.start_swaps import swap_starts

CLUSTER = ClusterView((host("a100", "A100", 2), host("t4", "T4", 4)))


def _table(rates: dict[tuple[str, int], float]):
    return lambda gpu_type, placement: rates.get((gpu_type, sum(placement)), 0.0)


# Measured on the local config (emulated A100 x2, T4 x4): the wide CNN gains 1.8x from an
# A100 over a T4 and the small one 3.7x, so comparative advantage sends the small one to the A100s.
WIDE = _table({("A100", 1): 1930, ("A100", 2): 3478, ("T4", 1): 500, ("T4", 2): 900, ("T4", 3): 1200,
               ("T4", 4): 1469})
SMALL = _table({("A100", 1): 6000, ("A100", 2): 11520, ("T4", 1): 1600, ("T4", 2): 3000, ("T4", 3): 4300,
                ("T4", 4): 5600})


def _jobs(**wide) -> list[JobView]:
    return [JobView("wide", 1, 6, WIDE, remaining_samples=512_000, restart_cost_s=3.0, submitted_at=0.0,
                    priority=1, **wide),
            JobView("small", 1, 4, SMALL, remaining_samples=192_000, restart_cost_s=3.0, submitted_at=1.0)]


def test_the_long_new_job_gets_the_fast_gpus_when_that_finishes_both_sooner() -> None:
    before = HeetPolicy(swap_starts=False).plan(CLUSTER, _jobs(), 0.0)
    assert (before.allocations["small"].gpu_type, before.allocations["wide"].gpu_type) == ("A100", "T4"), \
        "the plan seen on the local config"
    plan = HeetPolicy().plan(CLUSTER, _jobs(), 0.0)
    assert plan.allocations["wide"] == alloc("wide", "A100", a100=(0, 1))
    assert plan.allocations["small"] == alloc("small", "T4", t4=(0, 1, 2, 3))
    done = {p.job_id: p.completion_s for p in plan.effect.jobs}
    was = {p.job_id: p.completion_s for p in before.effect.jobs}
    assert done["wide"] + done["small"] < 0.7 * (was["wide"] + was["small"]), (done, was)
    assert plan.effect.avg_jct_s < plan.effect.avg_jct_before_s, "better than queueing them"


def test_no_exchange_breaks_a_constraint_or_moves_a_running_job() -> None:
    pinned = HeetPolicy().plan(CLUSTER, _jobs(constraints=Constraints(pinned_type="T4")), 0.0)
    assert pinned.allocations["wide"].gpu_type == "T4", "pinned to the T4s: it stays there"
    running = _jobs(current=alloc("wide", "T4", t4=(0, 1, 2, 3)))
    kept = swap_starts(Problem(CLUSTER, running), {"wide": alloc("wide", "T4", t4=(0, 1, 2, 3)),
                                                   "small": alloc("small", "A100", a100=(0, 1))})
    assert kept["wide"].gpu_type == "T4", "a running job is not restarted by an exchange"
    a100_only = [*_jobs()[:1], JobView("small", 1, 4, SMALL, remaining_samples=192_000, gpu_types=("A100",))]
    only = swap_starts(Problem(CLUSTER, a100_only), {"wide": alloc("wide", "T4", t4=(0, 1, 2, 3)),
                                                   "small": alloc("small", "A100", a100=(0, 1))})
    assert only["small"].gpu_type == "A100", "small may not run on T4s"
