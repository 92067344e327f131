"""A lower bound on the average JCT that any policy can reach on a workload and cluster.

Why: a policy comparison says which policy is better, not how much better *any* policy could
be. This bound answers that for the simulator's physics with the workload's batch sizes: no
schedule, however clairvoyant, gets a lower average JCT. It is the relaxation of the whole run
as a linear program (HiGHS through scipy), in which

* a job cannot train before the first round at or after its submission plus its first
  restart pause (``round up + restart``), and needs a fixed amount of work (``bound_options``;
  with ``batch="adaptive"`` the bound is for a simulator in which policies also choose batches);
* it may switch between configurations at any moment, for free, and time-share them;
* only the GPU count of each type is a limit (no host fragmentation).

Time is cut into intervals: the round length for the first ``fine_factor`` alone-times after
a job's release, then 10 rounds, then 60, nested so that GPU capacity is counted in every
interval of every level. y[j, o, i] is the time job j spends in option o during interval i,
Y[j, o] its total. Two valid lower bounds on each completion time C_j are combined:

* ``C_j >= release_j + sum_o Y[j, o]`` (it is busy that long after its release);
* ``C_j >= M_j + Phi_j(Y)``, with M_j its mean busy time (each interval counted at its start)
  and Phi_j the least ``integral (C - t) w(t) dt`` any arrangement of its busy time achieves,
  which puts the fastest options last: with rates r_1 >= r_2 >= ... and S_l the time in the l
  fastest options, ``Phi = 1/2 sum_l (r_l - r_(l+1)) S_l^2``, convex, kept as tangent cuts
  (each a valid under-estimate).

Work left after the last interval is allowed, counted as done at the horizon. Every
simplification only lowers the value, so the result is a true bound; it is not a schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from heet_tui.sim.bound_options import Option, job_options
from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.physics import Physics
from heet_tui.sim.workload import WorkloadJob

LEVELS = (1, 10, 60)  # interval lengths in rounds, finest first
FINE_FLOOR_S = 1800.0
UNIT_S = 3600.0  # the LP's time unit: in seconds, S^2 terms reach 1e10 and interior point stalls


@dataclass(frozen=True, slots=True)
class BoundSettings:
    interval_s: float = 60.0  # the simulator's round: admissions and the finest intervals
    placements: str = "any"  # "any": every placement the hosts allow; "packed": as goodput-mip and the baselines place
    batch: str = "fixed"  # "fixed": the workload's batch (the simulator); "adaptive": any validated batch
    fine_factor: float = 3.0  # finest intervals for this many times the job's alone time
    tangents: int = 12  # cuts per term of Phi
    max_variables: int = 3_000_000  # refuse larger LPs (memory and hours of solving)


@dataclass(frozen=True, slots=True)
class BoundResult:
    avg_jct_s: float  # the lower bound on the average JCT
    alone_avg_jct_s: float  # the weaker bound of every job alone on the empty cluster
    jobs: int
    unschedulable: tuple[str, ...]  # jobs that can run nowhere (left out of both averages)
    variables: int
    solve_s: float
    placements: str
    batch: str


@dataclass(frozen=True, slots=True)
class _Job:
    spec: WorkloadJob
    options: list[Option]
    release: float  # earliest time it can train


def admission(submitted: float, interval: float) -> float:
    """The round at which the simulator first shows a job to the policy."""
    return max(interval, math.ceil(submitted / interval - 1e-9) * interval)


def _intervals(release: float, fine_s: float, horizon: float, interval: float) -> list[tuple[int, float, float]]:
    """(level, start, end) partitioning [release, horizon), each level's intervals aligned."""
    out: list[tuple[int, float, float]] = []
    t = release
    until = (release + fine_s, release + 6 * fine_s, horizon)
    for level, size_rounds in enumerate(LEVELS):
        size = size_rounds * interval
        coarser = LEVELS[level + 1] * interval if level + 1 < len(LEVELS) else None
        while t < horizon - 1e-9:
            if coarser is not None and t >= until[level] and _aligned(t, coarser):
                break
            end = min((math.floor(t / size + 1e-9) + 1) * size, horizon)
            out.append((level, t, end))
            t = end
    return out


def _aligned(t: float, size: float) -> bool:
    return abs(t / size - round(t / size)) < 1e-9


class _Builder:
    """Sparse LP rows and columns, appended as numpy blocks."""

    def __init__(self) -> None:
        self.cost: list[np.ndarray] = []
        self.n_cols = 0
        self.ub: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.b_ub: list[float] = []
        self.eq: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.b_eq: list[float] = []

    def columns(self, n: int, cost: float = 0.0) -> np.ndarray:
        self.cost.append(np.full(n, cost))
        self.n_cols += n
        return np.arange(self.n_cols - n, self.n_cols)

    def rows(self, kind: str, row_of: np.ndarray, cols: np.ndarray, vals: np.ndarray, rhs: Sequence[float]) -> None:
        """Rows ``row_of`` (0-based within this block) of ``kind`` "ub" (<=) or "eq" (=)."""
        target, bounds = (self.ub, self.b_ub) if kind == "ub" else (self.eq, self.b_eq)
        target.append((np.asarray(row_of, dtype=np.int64) + len(bounds), np.asarray(cols, dtype=np.int64),
                       np.asarray(vals, dtype=float)))
        bounds.extend(rhs)

    def matrix(self, kind: str):
        blocks, bounds = (self.ub, self.b_ub) if kind == "ub" else (self.eq, self.b_eq)
        r, c, v = (np.concatenate([b[i] for b in blocks]) for i in range(3))
        return coo_matrix((v, (r, c)), shape=(len(bounds), self.n_cols)).tocsr(), np.array(bounds)


def lower_bound(cluster: SimCluster, physics: Physics, workload: Sequence[WorkloadJob],
                settings: BoundSettings | None = None) -> BoundResult:
    """The bound for one workload (see the module docstring); raises ``ValueError`` when the LP
    would exceed ``max_variables`` or the solver fails."""
    s = settings or BoundSettings()
    jobs: list[_Job] = []
    unschedulable: list[str] = []
    for spec in workload:
        phys = physics.get(spec.application)
        options = job_options(spec, phys, cluster, s.placements, s.batch)
        if not options:
            unschedulable.append(spec.name)
            continue
        jobs.append(_Job(spec, options, admission(spec.time, s.interval_s) + phys.restart_s))
    if not jobs:
        raise ValueError("no job of the workload can run on this cluster")
    alone = float(np.mean([j.release + 1.0 / j.options[0].rate - j.spec.time for j in jobs]))
    capacity = {t: cluster.gpus_of_type(t) for t in cluster.gpu_types()}
    top = LEVELS[-1] * s.interval_s
    load = sum(min(o.count / o.rate for o in j.options) for j in jobs) / max(1, sum(capacity.values()))
    longest = max(1.0 / j.options[0].rate for j in jobs)
    horizon = math.ceil((max(j.release for j in jobs) + 2 * (load + longest)) / top) * top
    plans = [[(level, a / UNIT_S, b / UNIT_S) for level, a, b in
              _intervals(j.release, max(FINE_FLOOR_S, s.fine_factor / j.options[0].rate), horizon, s.interval_s)]
             for j in jobs]
    size = sum(len(p) * len(j.options) for p, j in zip(plans, jobs, strict=True))
    if size > s.max_variables:
        raise ValueError(f"the bound's LP would have {size:,} variables (limit {s.max_variables:,}): "
                         f"use a longer --grid or a smaller workload")
    lp = _Builder()
    cap_keys: dict[tuple[int, str, int], int] = {}
    cap_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for job, plan in zip(jobs, plans, strict=True):
        _add_job(lp, job, plan, horizon / UNIT_S, s, cap_keys, cap_parts)
    row_key = np.concatenate([p[0] for p in cap_parts])
    cols = np.concatenate([p[1] for p in cap_parts])
    vals = np.concatenate([p[2] for p in cap_parts])
    rhs = [capacity[t] * LEVELS[level] * s.interval_s / UNIT_S for (level, t, _), _ in sorted(cap_keys.items(), key=lambda kv: kv[1])]
    lp.rows("ub", row_key, cols, vals, rhs)
    a_ub, b_ub = lp.matrix("ub")
    a_eq, b_eq = lp.matrix("eq")
    started = time.perf_counter()
    res = linprog(np.concatenate(lp.cost), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=(0, None),
                  method="highs-ipm")
    if res.status != 0 or res.fun is None:
        raise ValueError(f"the bound's LP was not solved: {res.message}")
    total = float(res.fun) * UNIT_S - sum(j.spec.time for j in jobs)
    return BoundResult(total / len(jobs), alone, len(jobs), tuple(unschedulable), lp.n_cols,
                       time.perf_counter() - started, s.placements, s.batch)


def _add_job(lp: _Builder, job: _Job, plan: list[tuple[int, float, float]], horizon: float, s: BoundSettings,
             cap_keys: dict[tuple[int, str, int], int], cap_parts: list) -> None:
    opts = job.options
    n_o, n_i = len(opts), len(plan)
    rate = np.array([o.rate for o in opts]) * UNIT_S  # work per hour: every time below is in hours
    count = np.array([float(o.count) for o in opts])
    starts = np.array([a for _, a, _ in plan])
    y = lp.columns(n_i * n_o).reshape(n_i, n_o)
    total = lp.columns(n_o)  # Y[o]
    done = lp.columns(1, cost=1.0)[0]  # C
    tail = lp.columns(1)[0]  # work left after the horizon
    # One configuration's worth of time per interval.
    lp.rows("ub", np.repeat(np.arange(n_i), n_o), y.ravel(), np.ones(n_i * n_o), [b - a for _, a, b in plan])
    # The whole work, and Y as the sum over intervals.
    lp.rows("eq", np.zeros(n_i * n_o + 1), np.append(y.ravel(), tail), np.append(np.tile(rate, n_i), 1.0), [1.0])
    lp.rows("eq", np.concatenate([np.tile(np.arange(n_o), n_i), np.arange(n_o)]),
            np.concatenate([y.ravel(), total]), np.concatenate([np.ones(n_i * n_o), -np.ones(n_o)]), [0.0] * n_o)
    # Busy after release, work past the horizon included (it takes at least tail / fastest rate).
    lp.rows("ub", np.zeros(n_o + 2), np.concatenate([total, [tail, done]]),
            np.concatenate([np.ones(n_o), [1.0 / rate[0], -1.0]]), [-job.release / UNIT_S])
    # Phi's terms: u_l >= S_l^2 through tangents at a: 2 a S_l - u_l <= a^2.
    rates = np.append(rate, 0.0)
    terms: list[tuple[int, float]] = []
    for level in range(n_o):
        delta = rates[level] - rates[level + 1]
        if delta <= 0:
            continue
        u = lp.columns(1)[0]
        terms.append((u, 0.5 * delta))
        points = np.geomspace(0.01, 2.0, s.tangents) / rates[level]
        r = np.repeat(np.arange(len(points)), level + 2)
        c = np.tile(np.append(total[:level + 1], u), len(points))
        v = np.concatenate([np.append(np.full(level + 1, 2 * a), -1.0) for a in points])
        lp.rows("ub", r, c, v, list(points ** 2))
    # C >= M + Phi.
    m_cols = np.concatenate([y.ravel(), [tail], [u for u, _ in terms], [done]])
    m_vals = np.concatenate([(starts[:, None] * rate[None, :]).ravel(), [horizon], [w for _, w in terms], [-1.0]])
    lp.rows("ub", np.zeros(len(m_cols)), m_cols, m_vals, [0.0])
    # GPU capacity: each y counts in its own interval and every coarser window holding it.
    for i, (level, a, _) in enumerate(plan):
        for lvl in range(level, len(LEVELS)):
            window = int(math.floor(a * UNIT_S / (LEVELS[lvl] * s.interval_s) + 1e-9))
            keys = [cap_keys.setdefault((lvl, o.gpu_type, window), len(cap_keys)) for o in opts]
            cap_parts.append((np.array(keys), y[i], count))
