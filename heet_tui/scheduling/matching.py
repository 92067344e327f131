"""Minimum-weight full bipartite matching of jobs to typed GPU slots.

Slots are sized from cluster pressure: with P = capacity / active jobs GPUs per job, a slot
holds s = largest power of two <= P GPUs (at least 1), so the matching offers every type
about capacity / s slots. A job's slot size on a type is s clipped to what it may use (its
current count is restored after the matching when it stays on its type).

Each job-slot edge weighs ``-(u_j(t, k) - price_t * k)``: the job's value on that slot minus
what its GPUs cost at the type's price. ``scipy.optimize.linear_sum_assignment`` then
matches every slot (or every job, when slots are plenty) at minimum total weight, which
assigns types by comparative advantage rather than by each job's favourite.

Slots of one type are identical columns, so a round with many slots is split POP-style into
sub-matchings of at most ``max_matching_columns`` columns: jobs, ranked by their best
surplus, are dealt round-robin to groups, and each group gets its share of every type's
slots. Each sub-problem is a faithful miniature of the whole, and the cost stays near-linear
in cluster size instead of cubic.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linear_sum_assignment

from heet_tui.scheduling.problem import JobInfo, Problem
from heet_tui.scheduling.valuation import Valuation

_BIG = 1e9
_INCUMBENT = 1e3  # larger than any normalised cost (those are within [-1, 1])


def slot_size(problem: Problem, active: list[JobInfo]) -> int:
    if not active:
        return 1
    pressure = problem.total_capacity / len(active)
    return 1 if pressure < 2 else 2 ** int(math.floor(math.log2(pressure)))


def slot_counts(problem: Problem, active: list[JobInfo], size: int) -> dict[tuple[str, str], int]:
    """(job id, type) -> GPUs the job's slot on that type would hold: the count up to the slot
    size at which the job is fastest (the fewest of equals). Throughput is not monotone in the
    count: more GPUs than fit one host, or than the batch splits well over, can be slower than
    fewer, and a lone job matched to a 16-GPU slot of T4s ran at a third of its 2-GPU speed. A
    size it crashed at is priced 0 by the controller, so a slot never launches it there again."""
    counts: dict[tuple[str, str], int] = {}
    for info in active:
        for gpu_type, cap in info.caps.items():
            k = max(info.min_gpus, min(size, cap))
            best = max(range(info.min_gpus, k + 1), key=lambda n: (problem.throughput(info, gpu_type, n), -n))
            counts[(info.id, gpu_type)] = best if problem.throughput(info, gpu_type, best) > 0 else k
    return counts


def slot_value(valuation: Valuation, info: JobInfo, gpu_type: str, k: int) -> float:
    """Value of a slot of ``k`` GPUs; on the job's current type, its current value per GPU x k.

    Staying on the current type is priced at what the job achieves now, undiscounted, so the
    matching compares like with like (k GPUs everywhere) and moving must beat the restart.
    """
    cur = info.current_config
    if cur is not None and cur[0] == gpu_type:
        return valuation.value(info, gpu_type, cur[1])
    return valuation.value(info, gpu_type, k)


def _may_move(valuation: Valuation, info: JobInfo, gpu_type: str) -> bool:
    """A running job may only be matched to another type if it gains there, restart included.

    The matching sees one column per job, so it would happily swap a large running job off
    its type for a slot's worth of someone else's value; this keeps type changes to moves
    that pay for themselves at the same GPU count.
    """
    cur = info.current_config
    if cur is None or cur[0] == gpu_type:
        return True
    k = min(cur[1], info.caps[gpu_type])
    return valuation.value(info, gpu_type, k) > valuation.value(info, cur[0], cur[1])


def match(problem: Problem, valuation: Valuation, active: list[JobInfo],
          max_columns: int) -> dict[str, tuple[str, int]]:
    """job id -> (type, count) for the jobs the matching admits, within every type's capacity."""
    if not active:
        return {}
    size = slot_size(problem, active)
    counts = slot_counts(problem, active, size)
    prices = valuation.prices(counts)
    types = [t for t in problem.types if problem.capacity[t] > 0]
    if not types:
        return {}
    # A running job that stays on its type keeps its count, which may exceed a slot: take the
    # excess out of that type's slot supply so the matching does not promise GPUs twice.
    extra = {t: 0 for t in types}
    for info in active:
        if info.current_config is not None and info.current_config[0] in extra:
            extra[info.current_config[0]] += max(0, info.current_config[1] - size)
    slots = np.array([max(1, -(-(problem.capacity[t] - extra[t]) // size)) for t in types])
    # Rows: surplus of each job on each type (value - price x GPUs); -inf where not allowed.
    surplus = np.full((len(active), len(types)), -np.inf)
    for r, info in enumerate(active):
        moving = info.current_config is not None
        for c, gpu_type in enumerate(types):
            k = counts.get((info.id, gpu_type))
            if k is not None and (not moving or _may_move(valuation, info, gpu_type)):
                surplus[r, c] = slot_value(valuation, info, gpu_type, k) - prices[gpu_type] * k
    finite = surplus[np.isfinite(surplus)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    scale = scale if scale > 0 else 1.0
    cost = np.where(np.isfinite(surplus), -surplus / scale, _BIG)
    # Incumbents (running jobs that may keep their configuration) are always matched: taking
    # GPUs from them is trading's job, where the ask prices their loss GPU by GPU, restart
    # included. The matching only chooses their type among those that pay for a move.
    incumbent = np.array([info.current_config is not None for info in active])
    cost[incumbent] = np.where(cost[incumbent] < _BIG, cost[incumbent] - _INCUMBENT, _BIG)
    best = np.where(np.isfinite(surplus), surplus, -np.inf).max(axis=1)
    ranked = sorted(range(len(active)), key=lambda r: (-best[r], active[r].id))
    groups = max(1, math.ceil(int(slots.sum()) / max_columns))
    chosen: list[tuple[float, int, int]] = []  # (cost, row, type column)
    for g in range(groups):
        rows = ranked[g::groups]
        share = slots // groups + (g < slots % groups)
        columns = np.repeat(np.arange(len(types)), share)
        if not rows or columns.size == 0:
            continue
        sub = cost[np.ix_(rows, columns)]
        r_idx, c_idx = linear_sum_assignment(sub)
        for r, c in zip(r_idx, c_idx, strict=True):
            if sub[r, c] < _BIG / 2:
                chosen.append((float(sub[r, c]), rows[r], int(columns[c])))
    left = {t: problem.capacity[t] for t in types}
    result: dict[str, tuple[str, int]] = {}
    # Admit jobs that keep their current configuration first (their GPUs exist: they hold
    # them), then the rest by cost; a slot that no longer fits shrinks to what is left.
    def admit_key(entry: tuple[float, int, int]) -> tuple[bool, float, int]:
        info = active[entry[1]]
        keeps = info.current_config is not None and info.current_config[0] == types[entry[2]]
        return (not keeps, entry[0], entry[1])

    for _, row, col in sorted(chosen, key=admit_key):
        info, gpu_type = active[row], types[col]
        want = counts[(info.id, gpu_type)]
        if info.current_config is not None and info.current_config[0] == gpu_type:
            want = info.current_config[1]
        k = min(want, left[gpu_type])
        if k >= info.min_gpus:
            result[info.id] = (gpu_type, k)
            left[gpu_type] -= k
    return result
