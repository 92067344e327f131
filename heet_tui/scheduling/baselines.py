"""Rigid baselines in the same interface: fifo, srtf and gavel (max-sum-throughput).

Each gives a job exactly its rigid count: the user's request (``requested_gpus``, else
``min_gpus``) clipped to its [min, max] range (a fixed-count constraint wins). They differ in
order and type choice, which is what the comparison with Heet is about:
- fifo: submission order, type-blind first fit, running jobs never preempted;
- srtf: shortest remaining time first (at the rigid count on the job's best type),
  preemptive, each job on the fastest type that still has room;
- gavel: heterogeneity-aware max-sum of normalised throughput (throughput on a type over
  the job's best type's) as a 0/1 program, weights growing with age so nobody starves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView
from heet_tui.scheduling.evaluate import evaluate_problem
from heet_tui.scheduling.placement import place
from heet_tui.scheduling.problem import JobInfo, Problem


def rigid_count(info: JobInfo) -> int:
    job = info.view
    return rigid_gpus(info.min_gpus, info.max_gpus, job.requested_gpus)


def rigid_gpus(min_gpus: int, max_gpus: int, requested: int | None) -> int:
    """The one count a rigid policy gives a job: its request, within its range (the simulator
    checks at submission that some GPU type holds that many)."""
    return max(min_gpus, min(max_gpus, requested if requested is not None else min_gpus))


def _finish(name: str, problem: Problem, targets: dict[str, tuple[str, int]], order: list[str],
            cluster: ClusterView, jobs: Sequence[JobView], now: float, predict: bool) -> Plan:
    allocations = place(problem, targets, order)
    effect = evaluate_problem(problem, allocations) if predict else None
    return Plan.build(problem.current, allocations, name, now, effect)


class FifoPolicy:
    name = "fifo"
    gives_rigid_count = True  # rigid_count(): a job no type holds that many GPUs of never runs

    def __init__(self, predict: bool = True) -> None:
        self.predict = predict

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs)
        left = dict(problem.capacity)
        host_order = list(dict.fromkeys(h.gpu_type for h in cluster.hosts))
        order = sorted(problem.infos, key=lambda i: (i.view.submitted_at, i.index))
        targets: dict[str, tuple[str, int]] = {}
        for info in order:  # running jobs keep what they have: fifo never preempts
            if info.current_config is not None and info.current_config[0] in info.caps:
                t, k = info.current_config
                if left[t] >= k:
                    targets[info.id] = (t, k)
                    left[t] -= k
        for info in order:
            if info.id in targets:
                continue
            k = rigid_count(info)
            for t in host_order:  # not at a size it cannot run at (throughput 0)
                if info.caps.get(t, 0) >= k and left[t] >= k and problem.throughput(info, t, k) > 0:
                    targets[info.id] = (t, k)
                    left[t] -= k
                    break
        return _finish(self.name, problem, targets, [i.id for i in order], cluster, jobs, now, self.predict)


class SrtfPolicy:
    name = "srtf"
    gives_rigid_count = True  # rigid_count(): a job no type holds that many GPUs of never runs

    def __init__(self, predict: bool = True) -> None:
        self.predict = predict

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs)
        left = dict(problem.capacity)
        keyed = []
        for info in problem.infos:
            k = rigid_count(info)
            speeds = {t: problem.throughput(info, t, k) for t, cap in info.caps.items() if cap >= k}
            best = max(speeds.values(), default=0.0)
            if best > 0:
                keyed.append((problem.remaining_samples(info) / best, info.index, info, k, speeds))
        keyed.sort(key=lambda e: (e[0], e[1]))
        targets: dict[str, tuple[str, int]] = {}
        for _, _, info, k, speeds in keyed:
            for t in sorted(speeds, key=lambda t: (-speeds[t], t)):
                if left[t] >= k and speeds[t] > 0:
                    targets[info.id] = (t, k)
                    left[t] -= k
                    break
        order = [e[2].id for e in keyed]
        return _finish(self.name, problem, targets, order, cluster, jobs, now, self.predict)


class GavelPolicy:
    name = "gavel"
    gives_rigid_count = True  # rigid_count(): a job no type holds that many GPUs of never runs

    def __init__(self, predict: bool = True, age_scale_s: float = 3600.0, time_limit_s: float = 10.0) -> None:
        if not age_scale_s > 0 or not time_limit_s > 0:
            raise ValueError("gavel: age_scale_s and time_limit_s must be > 0")
        self.predict = predict
        self.age_scale_s = age_scale_s
        self.time_limit_s = time_limit_s

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs)
        types = list(problem.types)
        cols: list[tuple[JobInfo, str, int, float]] = []
        for info in problem.infos:
            k = rigid_count(info)
            speeds = {t: problem.throughput(info, t, k) for t, cap in info.caps.items() if cap >= k}
            best = max(speeds.values(), default=0.0)
            if best <= 0:
                continue
            weight = 1.0 + info.view.age_s / self.age_scale_s
            for t, s in speeds.items():
                if s > 0:
                    cols.append((info, t, k, weight * s / best))
        targets: dict[str, tuple[str, int]] = {}
        if cols:
            chosen = _solve_choice(cols, types, problem.capacity, self.time_limit_s)
            for i in chosen:
                info, t, k, _ = cols[i]
                targets[info.id] = (t, k)
        order = [i.id for i in sorted(problem.infos, key=lambda i: (-i.view.age_s, i.index))]
        return _finish(self.name, problem, targets, order, cluster, jobs, now, self.predict)


def _solve_choice(cols: list[tuple[JobInfo, str, int, float]], types: list[str], capacity: dict[str, int],
                  time_limit_s: float) -> list[int]:
    """Pick at most one option per job, within capacity, maximising the summed value (HiGHS)."""
    jobs = sorted({c[0].index for c in cols})
    job_row = {j: r for r, j in enumerate(jobs)}
    type_row = {t: len(jobs) + r for r, t in enumerate(types)}
    a = lil_matrix((len(jobs) + len(types), len(cols)))
    for i, (info, t, k, _) in enumerate(cols):
        a[job_row[info.index], i] = 1
        a[type_row[t], i] = k
    ub = np.array([1.0] * len(jobs) + [float(capacity[t]) for t in types])
    value = np.array([c[3] for c in cols])
    res = milp(-value, integrality=np.ones(len(cols)), bounds=Bounds(0, 1),
               constraints=LinearConstraint(a.tocsr(), -np.inf, ub),
               options={"time_limit": time_limit_s, "disp": False})
    if res.x is None:
        return []
    return [i for i, x in enumerate(res.x) if x > 0.5]
