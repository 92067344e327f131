"""New jobs trade places when that finishes the round's jobs sooner.

Heet picks each job's GPU type by how much the job gains from it relative to its best single
GPU (comparative advantage), which does not look at how long each job will take there. Seen
on the local config: two new jobs, a CNN that gains 4x from an A100 and would be done in 20 s
on the two A100s, and a wider model (priority 1) that gains 2.4x. The plan gave the A100s to
the short one and four T4s to the wide one (5m52s), predicting an average JCT of 3m28s where
simply queueing both on one GPU each was predicted 2m54s; the other way round, 2m30s and
about a minute.

So once a plan is placed, the jobs it starts (none of them loses work or pays a restart it
would not pay anyway) may exchange their allocations, pair by pair, while an exchange lowers
the summed predicted completion time of all the round's jobs (each weighted by its priority,
as the price function weighs it) by more than ``MARGIN``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from itertools import combinations

from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.evaluate import predict_completions
from heet_tui.scheduling.problem import JobInfo, Problem

MAX_STARTS = 8  # starts considered per round: each pair costs one prediction of the plan
MAX_PREDICTIONS = 64  # per round in all (a prediction is O(jobs): 1 ms at 4,000 jobs)
MARGIN = 0.01  # an exchange must save this share of the weighted total


def swap_starts(problem: Problem, allocations: Mapping[str, Allocation]) -> dict[str, Allocation]:
    """``allocations`` with starts exchanged where that finishes jobs sooner (module docstring)."""
    out = dict(allocations)
    starts = [j for j, a in out.items() if a.num_gpus and not _holds(problem.by_id[j])]
    starts = sorted(starts, key=lambda j: (problem.by_id[j].view.submitted_at, j))[:MAX_STARTS]
    if len(starts) < 2:
        return out
    total, budget = _weighted_total(problem, out), MAX_PREDICTIONS
    for _ in range(len(starts)):  # each exchange lowers the total: a handful suffices
        best: tuple[float, dict[str, Allocation]] | None = None
        for a, b in combinations(starts, 2):
            mine, theirs = out[a], out[b]
            if mine.gpu_type == theirs.gpu_type or not (_fits(problem.by_id[a], theirs)
                                                         and _fits(problem.by_id[b], mine)) or budget <= 0:
                continue
            trial = {**out, a: replace(theirs, job_id=a), b: replace(mine, job_id=b)}
            score, budget = _weighted_total(problem, trial), budget - 1
            if score < total * (1.0 - MARGIN) and (best is None or score < best[0]):
                best = (score, trial)
        if best is None:
            break
        total, out = best
    return out


def _holds(info: JobInfo) -> bool:
    return info.view.current is not None and info.view.current.num_gpus > 0


def _fits(info: JobInfo, alloc: Allocation) -> bool:
    """Whether the job may run on exactly these GPUs: its type, count and host constraints."""
    if alloc.gpu_type not in info.caps or not info.min_gpus <= alloc.num_gpus <= info.max_gpus:
        return False
    if info.hosts_allowed is not None and not set(alloc.host_names) <= info.hosts_allowed:
        return False
    return Problem.throughput_at(info.view, alloc.gpu_type, alloc.placement) > 0


def _weighted_total(problem: Problem, allocations: Mapping[str, Allocation]) -> float:
    done = predict_completions(problem, allocations)
    return sum(_weight(problem.by_id[j]) * (math.inf if t is None else t) for j, t in done.items())


def _weight(info: JobInfo) -> float:
    return 2.0 ** max(-20, min(20, info.view.priority))
