"""Opportunistic resource trading: move single GPUs within a type until prices cross.

The matching hands out whole slots; it cannot tell that a job would gain more from a fifth
GPU than another loses from its fourth. Trading fixes that at the margin. On each type, the
bid of a job is the value its next GPU adds (u(k+1) - u(k); for a waiting job u(min) per GPU
of its smallest count) and the ask of a holder the value its last GPU adds (u(k) - u(k-1),
never below its minimum; a free GPU asks 0). While the highest bid beats the lowest ask, one
GPU moves from that holder to that bidder. Each move strictly raises total value, so it ends;
when it ends the two prices have crossed and the allocation is stable at the margin.

A running job's bid and ask both include its restart discount (see valuation), so a GPU
is only taken from or given to it when the gain outweighs the pause.
"""

from __future__ import annotations

import heapq

from heet_tui.scheduling.problem import JobInfo, Problem
from heet_tui.scheduling.valuation import Valuation

_EPS = 1e-12


def trade(problem: Problem, valuation: Valuation, active: list[JobInfo],
          assigned: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    state = dict(assigned)
    for gpu_type in problem.types:
        _trade_type(problem, valuation, active, state, gpu_type)
    return state


def _trade_type(problem: Problem, valuation: Valuation, active: list[JobInfo],
                state: dict[str, tuple[str, int]], gpu_type: str) -> None:
    used = sum(k for t, k in state.values() if t == gpu_type)
    free = problem.capacity[gpu_type] - used
    bids: list[tuple[float, str, int, int]] = []  # (-gain per GPU, job, count when pushed, GPUs needed)
    asks: list[tuple[float, str, int]] = []  # (loss, job, count when pushed)

    def push(info: JobInfo) -> None:
        t_k = state.get(info.id)
        if t_k is None:
            k = info.min_gpus
            gain = valuation.value(info, gpu_type, k)
            heapq.heappush(bids, (-gain / k, info.id, 0, k))
            return
        if t_k[0] != gpu_type:
            return
        k = t_k[1]
        top = info.caps[gpu_type]
        if k < top:
            here = valuation.value(info, gpu_type, k)
            gain = valuation.value(info, gpu_type, k + 1) - here
            heapq.heappush(bids, (-gain, info.id, k, 1))
            # A jump of several GPUs (from free ones) can pay where one does not: a restart
            # costs the same for +1 as for +d, and host-sized steps scale better.
            for d in _jumps(k, top, free_now()):
                jump = (valuation.value(info, gpu_type, k + d) - here) / d
                if jump > gain:
                    heapq.heappush(bids, (-jump, info.id, k, d))
        if k > info.min_gpus or k == 1:  # a one-GPU job may be stopped: its ask is its whole value
            loss = valuation.value(info, gpu_type, k) - valuation.value(info, gpu_type, k - 1)
            heapq.heappush(asks, (loss, info.id, k))

    def free_now() -> int:
        return free

    members = [info for info in active if gpu_type in info.caps]
    for info in members:
        free += _shed(valuation, info, state, gpu_type)
        push(info)
    by_id = {info.id: info for info in members}

    def count_of(job_id: str) -> int | None:
        t_k = state.get(job_id)
        if t_k is None:
            return 0
        return t_k[1] if t_k[0] == gpu_type else None

    guard = 4 * problem.capacity[gpu_type] + 2 * len(members) + 8
    while bids and guard > 0:
        guard -= 1
        neg_gain, job_id, k, units = heapq.heappop(bids)
        if count_of(job_id) != k:
            continue  # stale
        gain = -neg_gain
        if gain <= _EPS:
            break
        if units <= free:
            free -= units
            state[job_id] = (gpu_type, k + units)
            push(by_id[job_id])
            continue
        if units > 1:
            continue  # a multi-GPU start needs free GPUs; trading moves one GPU at a time
        donor = _lowest_ask(asks, count_of, job_id)
        if donor is None or donor[0] >= gain - _EPS:
            if donor is not None:
                heapq.heappush(asks, donor)
            break
        _, donor_id, dk = donor
        if k > 0 and valuation.params.jct_guard and not _pays_in_time(problem, valuation, by_id[job_id], k,
                                                                       by_id[donor_id], dk, gpu_type):
            heapq.heappush(asks, donor)
            continue
        if dk == 1:
            del state[donor_id]
        else:
            state[donor_id] = (gpu_type, dk - 1)
        state[job_id] = (gpu_type, k + 1)
        push(by_id[donor_id])
        push(by_id[job_id])


def _shed(valuation: Valuation, info: JobInfo, state: dict[str, tuple[str, int]], gpu_type: str) -> int:
    """GPUs a holder gives back because it is worth more without them (how many).

    Trading moves a GPU only to a higher bid, and a free GPU bids nothing, so a job whose last
    GPUs *lower* its value kept them: a lone job whose step is all communication ran at 12k
    samples/s on two A100s, 55k on one, and the plan moved it to one T4 (26k) instead, then
    back to one A100 in the next round. Queued, the same job got nothing: two A100s, switched
    to one T4, then held back for the A100s that were free all along (deferral), every round.
    Each GPU given back raises the total value, as every trade does.

    It gives back to the best count below, not only while the next one down is better: value is
    not concave in the count (5 GPUs on 4-GPU hosts span two hosts), and a lone cifar10 job
    matched to a 16-GPU slot of T4s stopped at 15 (678 samples/s) above a dip at 14, when 2
    run it at 1,917: it took 2.1x as long on 7x the GPUs, with its true throughputs known.
    """
    t_k = state.get(info.id)
    if t_k is None or t_k[0] != gpu_type:
        return 0
    k = best = t_k[1]
    top = valuation.value(info, gpu_type, k)
    for fewer in range(k - 1, max(info.min_gpus, 1) - 1, -1):
        v = valuation.value(info, gpu_type, fewer)
        if v > top + _EPS:
            best, top = fewer, v
    state[info.id] = (gpu_type, best)
    return k - best


def _pays_in_time(problem: Problem, valuation: Valuation, receiver: JobInfo, k: int, donor: JobInfo, dk: int,
                  gpu_type: str) -> bool:
    """Whether a GPU taken from a running job to grow another saves more seconds than it costs.

    Values are completion rates (1 / remaining time), which is right for *ordering* work but
    makes a long job's delays look free: a 250 s restart of a 9-hour imagenet weighs 3,600
    times less than the same pause of a 5-minute job. Every second of delay counts the same
    in the average JCT, so a grow that takes a GPU from a running job must save the receiver
    more time than the donor loses, its restart included. A waiting job's first start is
    exempt (SRPT's queue jumping is where the completion-rate ordering pays).
    """
    def time_left(info: JobInfo, count: int) -> float:
        thr = problem.throughput(info, gpu_type, count) if count > 0 else 0.0
        return valuation.remaining[info.id] / thr if thr > 0 else float("inf")

    saved = time_left(receiver, k) - time_left(receiver, k + 1) - receiver.view.restart_cost_s
    if donor.view.current is None:
        return saved > 0
    lost = (time_left(donor, dk - 1) - time_left(donor, dk)) + donor.view.restart_cost_s
    return saved > lost


def _jumps(k: int, top: int, free: int) -> list[int]:
    """Multi-GPU steps worth pricing: doublings and fill-ups to the cap, within the free GPUs."""
    out = set()
    d = 2
    while d <= min(top - k, free):
        out.add(d)
        d *= 2
    if 1 < min(top - k, free):
        out.add(min(top - k, free))
    return sorted(out)


def _lowest_ask(asks: list[tuple[float, str, int]], count_of, receiver: str) -> tuple[float, str, int] | None:
    skipped = []
    found = None
    while asks:
        entry = heapq.heappop(asks)
        if count_of(entry[1]) != entry[2]:
            continue
        if entry[1] == receiver:
            skipped.append(entry)
            continue
        found = entry
        break
    for entry in skipped:
        heapq.heappush(asks, entry)
    return found
