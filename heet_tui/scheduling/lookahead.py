"""Look-ahead planning: a time-indexed LP over the active jobs' remaining work.

A round's value function (completion rate, goodput) sees only the next minute, yet who
should hold the fast GPUs depends on what the cluster will do for hours. This stage solves
the relaxation of "finish every active job as early as possible on average":

    x[j, c, s] in [0, 1]   the share of slot s that job j spends in configuration c
    sum_c x[j, c, s] <= 1                         a job runs one configuration at a time
    sum_{j, c on t} k_c x[j, c, s] <= cap_t       GPUs of each type
    sum_{c, s} r[j, c] L_s x[j, c, s] = 1         every job finishes its remaining work
    x[j, stay, s + 1] <= x[j, stay, s]            staying is free only without a gap
    minimise sum_j sum_{c, s} r[j, c] L_s mid_s x[j, c, s]   (each job's mean busy time)

r[j, c] is throughput / remaining samples: the fraction of the job that configuration c
completes per second. Each running job gets a "stay" copy of the configuration it holds at
full rate; every other configuration (and a queued job's first start) has its rate scaled
by H / (H + w * restart), the share of time left for work when the pause comes first, with
H = min(``horizon_s``, the job's best remaining time). The stay copy may only fade out over
time, never come back: resuming after a preemption pays the restart like any move.

Slots are 1, 2, 3, 4 and 5 minutes, then 10, 15 and 30, then 1.5x longer each, up to a span
that holds all the work on the whole cluster and the longest job twice over; work that still
does not fit is charged as done after the last slot, so the LP is always feasible. The near
future is detailed and the far future coarse but still felt: a 9-hour job and a 4-minute job trade
GPUs knowing each other's lengths, and types go to jobs by comparative advantage over the
whole horizon. Per job and type only the upper concave hull of (count, rate) is offered
(time-sharing two configurations dominates anything under the hull), so the LP stays small.
Only the first slot is acted on (see ``lookahead_policy``); the next round re-solves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix

from heet_tui.scheduling.goodput_mip import candidate_counts
from heet_tui.scheduling.problem import JobInfo, Problem

FIRST_SLOTS_S = (60.0, 120.0, 180.0, 240.0, 300.0, 600.0, 900.0, 1800.0)
SLOT_GROWTH = 1.5

# Per job id: (gpu type, count) -> share of the first slot the LP gives that configuration.
FirstSlot = dict[str, dict[tuple[str, int], float]]


@dataclass(frozen=True, slots=True)
class LookaheadParams:
    horizon_s: float = 7200.0  # how long a new configuration is assumed to last (restart amortised over it)
    restart_weight: float = 3.0  # a running job's restart counted this many times (configurations rarely last)
    max_configs_per_type: int = 8
    keep: float = 0.5  # a running job stays put when its current configuration has this share of its plan
    min_share: float = 0.5  # a job the LP runs for less of the first slot than this waits
    max_jobs_per_lp: int = 96  # larger rounds are split into POP groups of about this many jobs

    def __post_init__(self) -> None:
        if not self.horizon_s > 0 or self.restart_weight < 0:
            raise ValueError("lookahead: horizon_s must be > 0 and restart_weight >= 0")
        if self.max_configs_per_type < 2 or self.max_jobs_per_lp < 1:
            raise ValueError("lookahead: max_configs_per_type must be >= 2 and max_jobs_per_lp >= 1")
        if not (0 <= self.keep <= 1 and 0 < self.min_share <= 1):
            raise ValueError("lookahead: keep must be in [0, 1] and min_share in (0, 1]")


@dataclass(frozen=True, slots=True)
class Config:
    job: int  # index into the solved job list
    gpu_type: str
    count: int
    rate: float  # fraction of the job's remaining work per second, restart discount applied
    stay: bool  # the configuration the job holds now, at full rate


def slot_edges(span_s: float) -> list[float]:
    """Slot boundaries from 0: the fixed first slots, then slots 1.5x longer up to ``span_s``."""
    edges = [0.0]
    for length in FIRST_SLOTS_S:
        edges.append(edges[-1] + length)
    length = FIRST_SLOTS_S[-1]
    while edges[-1] < span_s:
        length *= SLOT_GROWTH
        edges.append(edges[-1] + length)
    return edges


def upper_hull(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """The points on the upper concave hull of (count, rate) and the origin, origin left out."""
    hull: list[tuple[int, float]] = [(0, 0.0)]
    for p in sorted(set(points)):
        if p[1] <= hull[-1][1]:
            continue  # more GPUs, no more speed: never worth it
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (p[0] - x1) <= (p[1] - y1) * (x2 - x1):  # hull[-1] lies on or under the chord
                hull.pop()
            else:
                break
        hull.append(p)
    return hull[1:]


def thin(points: list[tuple[int, float]], most: int) -> list[tuple[int, float]]:
    """At most ``most`` points spread evenly over the list, the largest always kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    picked = {min(len(points) - 1, int(i * step)) for i in range(most - 1)} | {len(points) - 1}
    return [points[i] for i in sorted(picked)]


def job_configs(problem: Problem, info: JobInfo, index: int, capacity: Mapping[str, int],
                params: LookaheadParams) -> list[Config]:
    remaining = problem.remaining_samples(info)
    rates = {(t, k): problem.throughput(info, t, k) / remaining
             for t, cap in info.caps.items() for k in candidate_counts(info.min_gpus, min(cap, capacity.get(t, 0)))}
    best = max(rates.values(), default=0.0)
    if best <= 0:
        return []
    horizon = min(params.horizon_s, 1.0 / best)
    running = info.current_config is not None
    pause = info.view.restart_cost_s * (params.restart_weight if running else 1.0)
    discount = horizon / (horizon + pause)
    out: list[Config] = []
    for t in info.caps:
        hull = upper_hull([(k, r * discount) for (tt, k), r in rates.items() if tt == t and r > 0])
        out.extend(Config(index, t, k, r, False) for k, r in thin(hull, params.max_configs_per_type))
    if running:
        t, k = info.current_config  # type: ignore[misc]
        rate = problem.throughput(info, t, k) / remaining
        if rate > 0 and k <= capacity.get(t, 0):
            out.append(Config(index, t, k, rate, True))
    return out


def solve_first_slot(problem: Problem, infos: Sequence[JobInfo], capacity: Mapping[str, int],
                     params: LookaheadParams) -> FirstSlot | None:
    """The LP's first slot per job (None when the solver fails, which the caller must handle)."""
    configs: list[Config] = []
    ids: list[str] = []
    for info in infos:
        own = job_configs(problem, info, len(ids), capacity, params)
        if own:
            configs.extend(own)
            ids.append(info.id)
    if not configs:
        return {}
    lp = _TimeIndexedLp(configs, len(ids), list(problem.types), capacity)
    x = lp.solve()
    if x is None:
        return None
    first = x[:len(configs)]
    out: FirstSlot = {j: {} for j in ids}
    for c, share in zip(configs, first, strict=True):
        if share > 1e-6:
            shares = out[ids[c.job]]
            shares[(c.gpu_type, c.count)] = shares.get((c.gpu_type, c.count), 0.0) + float(share)
    done = np.zeros(len(ids))
    np.add.at(done, lp.job_of, lp.rate * lp.lengths[0] * first)
    for j, job_id in enumerate(ids):
        total = sum(out[job_id].values())
        if done[j] > 0.999 and 0 < total < 1:  # it finishes within the slot: it wants all of it
            out[job_id] = {key: v / total for key, v in out[job_id].items()}
    return out


class _TimeIndexedLp:
    """The LP of the module docstring; variable s * n_cfg + i is x[config i, slot s], then one
    slack per job (work left past the last slot, charged as done there at the job's best rate)."""

    def __init__(self, configs: list[Config], n_jobs: int, types: list[str], capacity: Mapping[str, int]) -> None:
        self.configs, self.n_jobs, self.types, self.capacity = configs, n_jobs, types, capacity
        self.rate = np.array([c.rate for c in configs])
        self.job_of = np.array([c.job for c in configs])
        self.best = np.zeros(n_jobs)
        np.maximum.at(self.best, self.job_of, self.rate)
        gpu_s = np.full(n_jobs, np.inf)  # each job's GPU-seconds on its most GPU-efficient configuration
        np.minimum.at(gpu_s, self.job_of, np.array([c.count for c in configs]) / self.rate)
        # Long enough for all the work on the whole cluster and for the longest job twice over.
        span = max(3600.0, 2.0 / float(self.best.min()), 1.5 * float(gpu_s.sum()) / max(1, sum(capacity.values())))
        self.edges = np.array(slot_edges(span))
        self.lengths = np.diff(self.edges)

    def solve(self) -> np.ndarray | None:
        n_cfg, n_slots, n_jobs = len(self.configs), len(self.lengths), self.n_jobs
        var_s = np.repeat(np.arange(n_slots), n_cfg)
        var_i = np.tile(np.arange(n_cfg), n_slots)
        n_x = n_slots * n_cfg
        n_var = n_x + n_jobs
        work = self.rate[var_i] * self.lengths[var_s]
        mids = (self.edges[:-1] + self.edges[1:]) / 2
        a_ub, b_ub = self._inequalities(var_s, var_i, n_var)
        a_eq = coo_matrix((np.concatenate([work, np.ones(n_jobs)]),
                           (np.concatenate([self.job_of[var_i], np.arange(n_jobs)]), np.arange(n_var))),
                          shape=(n_jobs, n_var)).tocsr()
        cost = np.concatenate([work * mids[var_s], self.edges[-1] + 1.0 / self.best])
        bounds = np.column_stack([np.zeros(n_var), np.concatenate([np.ones(n_x), np.full(n_jobs, np.inf)])])
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(n_jobs), bounds=bounds, method="highs")
        return None if res.x is None else res.x

    def _inequalities(self, var_s: np.ndarray, var_i: np.ndarray, n_var: int) -> tuple[csr_matrix, np.ndarray]:
        n_cfg, n_slots, n_jobs, n_types = len(self.configs), len(self.lengths), self.n_jobs, len(self.types)
        type_row = {t: i for i, t in enumerate(self.types)}
        count = np.array([c.count for c in self.configs], dtype=float)
        trow = np.array([type_row[c.gpu_type] for c in self.configs])
        cols = np.arange(len(var_s))
        # One configuration at a time per job and slot; GPUs per type and slot.
        rows = [var_s * n_jobs + self.job_of[var_i], n_slots * n_jobs + var_s * n_types + trow[var_i]]
        vals = [np.ones(len(cols)), count[var_i]]
        cols_all = [cols, cols]
        b = [np.ones(n_slots * n_jobs), np.tile([float(self.capacity.get(t, 0)) for t in self.types], n_slots)]
        n_rows = n_slots * (n_jobs + n_types)
        # Staying is free only without a gap: a stay variable never rises from slot s to s + 1.
        stay = np.array([i for i, c in enumerate(self.configs) if c.stay], dtype=int)
        if len(stay) and n_slots > 1:
            s_idx = np.repeat(np.arange(n_slots - 1), len(stay))
            i_idx = np.tile(stay, n_slots - 1)
            r = n_rows + np.arange(len(s_idx))
            rows += [r, r]
            vals += [np.ones(len(r)), -np.ones(len(r))]
            cols_all += [(s_idx + 1) * n_cfg + i_idx, s_idx * n_cfg + i_idx]
            b.append(np.zeros(len(r)))
            n_rows += len(r)
        a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols_all))), shape=(n_rows, n_var))
        return a.tocsr(), np.concatenate(b)
