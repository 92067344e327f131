"""Heet's value of a configuration and the price of each GPU type.

A job j on k GPUs of type t progresses at ``thr_j(t, k) / R_j`` of itself per second (R_j its
remaining samples): that is the inverse of its remaining time, so maximising the sum over
jobs finishes work in the order that lowers the average completion time (SRPT for elastic
jobs). Writing thr_j(t, k) = k * thr_j(t, 1) * e_j(t, k) with the scaling efficiency
e_j(t, k) = thr_j(t, k) / (k * thr_j(t, 1)), the value per GPU is

    u_j(t, k) / k = boost_j * e_j(t, k) * thr_j(t, 1) / R_j
                  = boost_j * (scaling efficiency) * (scheduling efficiency on t)

so one number weighs how well a job uses another GPU against how soon it would finish.
``boost_j = 2 ** (age / age_scale + priority)`` doubles every ``age_scale`` of age, so a job
k times longer than its competitors overtakes them after at most log2(k) x age_scale more
waiting: no job starves under a constant load. A configuration other than the one a running job holds
pays for its restart: its value is scaled by ``H / (H + restart_cost)`` (the share of wall time
spent working when the pause comes first), which is the restart hysteresis. A queued job's
first start pays its pause once, whatever the configuration: speed is worth little to a job
whose remaining time is mostly that pause.

The price of type t is the value per GPU of the marginal bidder: sort every job's bid for t
(value per GPU at its slot size), walk down until the demand exceeds the type's capacity;
the bid there is the price (0 when demand fits). It rises with contention, and a job gets
GPUs of t only where its value per GPU beats it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heet_tui.scheduling.problem import JobInfo, Problem


@dataclass(frozen=True, slots=True)
class HeetParams:
    horizon_s: float = 3600.0  # how long a configuration change is assumed to pay off
    age_scale_s: float = 14400.0  # waiting this long doubles a job's weight
    max_matching_columns: int = 160  # larger rounds are split into sub-matchings (POP)
    price_weight: float = 1.0  # 0 turns prices off (ablation)
    restart_weight: float = 3.0  # restarts counted this many times (a new configuration may not last)
    first_start_weight: float = 1.0  # a queued job's first start, counted this many times (0: ignored)
    srpt_exponent: float = 1.0  # weight = boost / (one-GPU remaining time) ** this; 0 = size-blind
    scaling_exponent: float = 1.0  # value grows as (speedup over one best GPU) ** this
    jct_guard: bool = True  # a grow must save more seconds than it costs the job it takes from
    switch_types: bool = True  # cross-type trading (switching.py); False: the matching's types stand
    defer_starts: bool = True  # a start on a slow type waits when a faster one frees sooner (deferral.py)
    swap_starts: bool = True  # new jobs exchange allocations when that finishes jobs sooner (start_swaps.py)

    def __post_init__(self) -> None:
        for name in ("horizon_s", "age_scale_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"heet: {name} must be > 0, got {getattr(self, name)}")
        if self.max_matching_columns < 1:
            raise ValueError(f"heet: max_matching_columns must be >= 1, got {self.max_matching_columns}")
        if not self.price_weight >= 0:
            raise ValueError(f"heet: price_weight must be >= 0, got {self.price_weight}")


class Valuation:
    """Values u_j(t, k) for the active jobs of one round (see the module docstring)."""

    def __init__(self, problem: Problem, params: HeetParams) -> None:
        self.problem = problem
        self.params = params
        self.weight: dict[str, float] = {}
        self._memo: dict[tuple[str, str, int], float] = {}
        self.remaining: dict[str, float] = {}
        self.base: dict[str, float] = {}  # best one-GPU throughput: speedups are relative to it
        for info in problem.infos:
            if not info.caps:
                continue
            job = info.view
            remaining = problem.remaining_samples(info)
            boost = 2.0 ** (min(job.age_s / params.age_scale_s, 500.0) + max(-20, min(20, job.priority)))
            best = problem.best_single(info)
            self.base[info.id] = max(best, 1e-12)
            self.weight[info.id] = boost * (self.base[info.id] / remaining) ** params.srpt_exponent
            self.remaining[info.id] = remaining

    def value(self, info: JobInfo, gpu_type: str, count: int) -> float:
        if count <= 0:
            return 0.0
        key = (info.id, gpu_type, count)
        v = self._memo.get(key)
        if v is None:
            thr = self.problem.throughput(info, gpu_type, count)
            if thr > 0 and info.current_config != (gpu_type, count):  # a start or a restart comes first
                weight = self.params.first_start_weight if info.view.current is None else self.params.restart_weight
                thr *= self.keep(info, thr, weight)
            v = self.weight[info.id] * (thr / self.base[info.id]) ** self.params.scaling_exponent
            self._memo[key] = v
        return v

    def keep(self, info: JobInfo, thr: float, weight: float) -> float:
        """Share of wall time a new configuration spends working: H / (H + weight x restart pause).

        H is the shorter of ``horizon_s`` and the job's remaining time *at that throughput*
        (a job about to finish gains little from a restart, however big the step). Moving from
        throughput a to b then pays exactly when (b - a) x H > pause x a: the gain over the
        horizon exceeds what the pause costs. For a queued job (``first_start_weight``, 1) the
        value becomes 1 / (pause + remaining time): the rate at which it completes, start
        included. Without it, three short jobs on an empty cluster gave both A100s to the one
        that finishes 3 s sooner on two of them, and sent a job 10x longer to T4s.
        """
        horizon = self.remaining[info.id] / thr
        if horizon > self.params.horizon_s:
            horizon = self.params.horizon_s
        return horizon / (horizon + weight * info.view.restart_cost_s)

    def prices(self, slot_counts: dict[tuple[str, str], int]) -> dict[str, float]:
        """Clearing price per type from each job's bid at its slot size ``slot_counts[(job, type)]``."""
        bids: dict[str, list[tuple[float, int]]] = {t: [] for t in self.problem.types}
        for (job_id, gpu_type), k in slot_counts.items():
            info = self.problem.by_id[job_id]
            bids[gpu_type].append((self.value(info, gpu_type, k) / k, k))
        prices: dict[str, float] = {}
        for gpu_type, entries in bids.items():
            cap = self.problem.capacity[gpu_type]
            if not entries:
                prices[gpu_type] = 0.0
                continue
            per_gpu = np.array([b for b, _ in entries])
            counts = np.array([k for _, k in entries])
            order = np.argsort(-per_gpu, kind="stable")
            demand = np.cumsum(counts[order])
            over = np.nonzero(demand > cap)[0]
            prices[gpu_type] = float(per_gpu[order[over[0]]]) * self.params.price_weight if over.size else 0.0
        return prices
