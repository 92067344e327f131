"""goodput-mip: the Sia (SOSP 2023) formulation, the strong elastic baseline.

Binary x[j, c] for each job j and configuration c = (GPU type, count), counts in
{min, powers of two, max} up to what the job may use. Each job takes at most one
configuration, each type at most its capacity. Objective:

    maximise  sum_j sum_c x[j, c] * R[j, c] * G[j, c] ** p

G[j, c] is the normalised goodput: throughput on c over the job's best throughput at the smallest
count it runs at, so every job weighs the same whatever its model; 0 < p <= 1 is the fairness
exponent (p < 1 is concave: a GPU is worth more to a job with few). R is the reallocation
penalty: 1 for a queued job or the configuration a running job has now, ``age / (age +
restart_cost)`` for any other (as in Sia: a young job pays relatively more for a restart). Solved with
``scipy.optimize.milp`` (HiGHS). Sia also tunes batch sizes; here the job's throughput
function is taken as is, which is the same for every policy compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView
from heet_tui.scheduling.baselines import _finish, _solve_choice
from heet_tui.scheduling.problem import JobInfo, Problem


def candidate_counts(lo: int, hi: int) -> list[int]:
    counts = {lo, hi}
    k = 1
    while k < hi:
        if k > lo:
            counts.add(k)
        k *= 2
    return sorted(c for c in counts if lo <= c <= hi)


class GoodputMipPolicy:
    name = "goodput-mip"

    def __init__(self, predict: bool = True, fairness: float = 0.5, time_limit_s: float = 10.0) -> None:
        if not 0 < fairness <= 1:
            raise ValueError(f"goodput-mip: fairness exponent must be in (0, 1], got {fairness}")
        if not time_limit_s > 0:
            raise ValueError(f"goodput-mip: time_limit_s must be > 0, got {time_limit_s}")
        self.predict = predict
        self.fairness = fairness
        self.time_limit_s = time_limit_s

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs)
        cols: list[tuple[JobInfo, str, int, float]] = []
        for info in problem.infos:
            if not info.caps:
                continue
            base = _base_throughput(problem, info)
            if base <= 0:
                continue
            age, rc = info.view.age_s, info.view.restart_cost_s
            penalty = max(0.05, age / (age + rc)) if age + rc > 0 else 1.0
            for t, cap in info.caps.items():
                for k in candidate_counts(info.min_gpus, cap):
                    thr = problem.throughput(info, t, k)
                    if thr <= 0:
                        continue
                    value = (thr / base) ** self.fairness
                    if info.view.current is not None and info.current_config != (t, k):
                        value *= penalty
                    if value > 0:
                        cols.append((info, t, k, value))
        targets: dict[str, tuple[str, int]] = {}
        if cols:
            for i in _solve_choice(cols, list(problem.types), problem.capacity, self.time_limit_s):
                info, t, k, _ = cols[i]
                targets[info.id] = (t, k)
        order = [i.id for i in sorted(problem.infos, key=lambda i: (-i.view.age_s, i.index))]
        return _finish(self.name, problem, targets, order, cluster, jobs, now, self.predict)


def _base_throughput(problem: Problem, info: JobInfo) -> float:
    """The job's best speed at the smallest count that runs anywhere: what every choice is weighed
    against. At its minimum count alone, a model that runs on 2+ GPUs only (pipeline parallel)
    weighed zero there and was never started."""
    for k in range(info.min_gpus, max(info.caps.values()) + 1):
        base = max(problem.throughput(info, t, k) for t, cap in info.caps.items() if cap >= k)
        if base > 0:
            return base
    return 0.0
