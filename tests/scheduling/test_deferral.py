"""A start is held for faster GPUs only when the queue is predicted to start it on GPUs that free
later: held while a faster type was free already, the job sat "held for faster GPUs" beside an
idle V100 for minutes, as no plan then started it there."""

from __future__ import annotations

from sched_cases import alloc, curve, host, job

from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling.deferral import defer_slow_starts
from heet_tui.scheduling.problem import Problem

FN = curve(A100=1_500, V100=900, T4=300, serial=0.05)


def _cluster(a100_left: float) -> tuple[ClusterView, list]:
    cluster = ClusterView((host("a", "A100", 1), host("v", "V100", 1), host("t", "T4", 1)))
    running = job("r", lo=1, hi=1, work=a100_left, fn=FN, current=alloc("r", "A100", a=(0,)), restart_cost_s=5.0)
    new = job("n", lo=1, hi=1, work=27_000, fn=FN, restart_cost_s=5.0)
    return cluster, [running, new]


def test_a_start_on_a_slow_type_is_kept_when_a_faster_one_is_free_now() -> None:
    cluster, jobs = _cluster(a100_left=60_000)  # the A100 frees in 40 s; the V100, free now, does better
    planned = {"r": jobs[0].current, "n": alloc("n", "T4", t=(0,))}  # the plan's start: a T4
    assert defer_slow_starts(Problem(cluster, jobs), planned) == planned, "not held beside a free V100"


def test_it_is_held_when_only_the_faster_gpus_that_free_soon_beat_it() -> None:
    cluster = ClusterView((host("a", "A100", 1), host("t", "T4", 1)))
    jobs = [job("r", lo=1, hi=1, work=15_000, fn=FN, current=alloc("r", "A100", a=(0,)), restart_cost_s=5.0),
            job("n", lo=1, hi=1, work=27_000, fn=FN, restart_cost_s=5.0)]
    planned = {"r": jobs[0].current, "n": alloc("n", "T4", t=(0,))}
    assert "n" not in defer_slow_starts(Problem(cluster, jobs), planned), "the A100 frees in 10 s"
