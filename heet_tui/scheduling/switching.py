"""Cross-type trading: a job buys GPUs of a faster type from the holders that lose least.

The matching fixes each job's type before trading, and trading moves GPUs within one type,
so once long jobs hold the fast GPUs a short job that arrives later is matched to a slow
type and can never bid for the fast one: in the simulator, 130 short cifar10 jobs ran on
RTX2080Ti/T4 while imagenet and yolov3 sat on the A100s. This pass lets a job offer for
``k`` GPUs of another type (its current count or fewer, within what it may use): its gain is
u(t, k) - u(t', k') (restart discount included when it runs), the price is the free GPUs
there (0) plus the k lowest asks of that type's holders, each ask the value the holder's
last GPU adds, u(c) - u(c - 1) with the restart discount on the smaller configuration.
The switch is made when the gain beats the price, so each switch strictly raises the total
value, as in trading. Receivers go by decreasing weight (shortest work first), which is
what sends the jobs with the most to gain per GPU to the fast types: comparative advantage.
"""

from __future__ import annotations

import heapq

from heet_tui.scheduling.problem import JobInfo, Problem
from heet_tui.scheduling.valuation import Valuation

_EPS = 1e-12


def switch_types(problem: Problem, valuation: Valuation, active: list[JobInfo],
                 state: dict[str, tuple[str, int]]) -> bool:
    """Move jobs to other types where that raises total value; returns whether any moved."""
    if len(problem.types) < 2:
        return False
    by_id = {info.id: info for info in active}
    receivers = sorted((info for info in active if len(info.caps) > 1),
                       key=lambda i: (-valuation.weight[i.id], i.id))
    moved = False
    book = _Book(valuation, by_id, state)
    for info in receivers:
        here = state.get(info.id)
        current_value = valuation.value(info, here[0], here[1]) if here else 0.0
        best: tuple[float, str, int, dict[str, int]] | None = None
        for gpu_type, cap in info.caps.items():
            if here is not None and here[0] == gpu_type:
                continue
            top = max(info.min_gpus, min(here[1] if here else info.min_gpus, cap))
            for k in _counts(info.min_gpus, top):
                gain = valuation.value(info, gpu_type, k) - current_value
                if gain <= _EPS:
                    continue
                priced = _price(problem, valuation, book, gpu_type, k, gain)
                if priced is not None and (best is None or gain - priced[0] > best[0]):
                    best = (gain - priced[0], gpu_type, k, priced[1])
        if best is None or best[0] <= _EPS:
            continue
        _, gpu_type, k, takes = best
        if valuation.params.jct_guard and here is not None and not _saves_time(problem, valuation, info, here,
                                                                               (gpu_type, k), takes, state, by_id):
            continue
        for donor_id, n in takes.items():
            t, c = state[donor_id]
            if c - n > 0:
                state[donor_id] = (t, c - n)
            else:
                del state[donor_id]
        state[info.id] = (gpu_type, k)
        book.invalidate(gpu_type)
        if here is not None:
            book.invalidate(here[0])
        moved = True
    return moved


def _counts(low: int, top: int) -> list[int]:
    """The counts a job may offer for on another type: its own, its minimum and the powers of
    two between. With its own count only, a job on two T4s could not buy one A100 from a job
    holding two, however much more that A100 was worth to it than the second was to the holder."""
    out, k = {top, low}, 1
    while k < top:
        if k > low:
            out.add(k)
        k *= 2
    return sorted(out, reverse=True)


def _saves_time(problem: Problem, valuation: Valuation, info: JobInfo, here: tuple[str, int],
                there: tuple[str, int], takes: dict[str, int], state: dict[str, tuple[str, int]],
                by_id: dict[str, JobInfo]) -> bool:
    """Whether the switch saves the job more seconds than it costs the running jobs it takes from.

    The same accounting as trading's guard (see ``trading._pays_in_time``): values order work
    by completion rate, but a second of delay costs the average JCT the same for every job.
    A job that could not run at all is exempt.
    """
    def time_left(job: JobInfo, gpu_type: str, count: int) -> float:
        thr = problem.throughput(job, gpu_type, count) if count > 0 else 0.0
        return valuation.remaining[job.id] / thr if thr > 0 else float("inf")

    saved = time_left(info, *here) - time_left(info, *there)
    if info.view.current is not None:
        saved -= info.view.restart_cost_s
    lost = 0.0
    for donor_id, n in takes.items():
        donor = by_id[donor_id]
        if donor.view.current is None:
            continue
        t, c = state[donor_id]
        lost += time_left(donor, t, c - n) - time_left(donor, t, c) + donor.view.restart_cost_s
    return saved > lost


class _Book:
    """Per type: GPUs in use and the holders' first asks, sorted; rebuilt only after a switch."""

    def __init__(self, valuation: Valuation, by_id: dict[str, JobInfo], state: dict[str, tuple[str, int]]) -> None:
        self.valuation, self.by_id, self.state = valuation, by_id, state
        self._books: dict[str, tuple[int, list[tuple[float, str, int]]]] = {}

    def invalidate(self, gpu_type: str) -> None:
        self._books.pop(gpu_type, None)

    def get(self, gpu_type: str) -> tuple[int, list[tuple[float, str, int]]]:
        book = self._books.get(gpu_type)
        if book is None:
            used, asks = 0, []
            for job_id, (t, c) in self.state.items():
                if t != gpu_type:
                    continue
                used += c
                if c - 1 >= self.by_id[job_id].min_gpus:
                    asks.append((_ask(self.valuation, self.by_id[job_id], gpu_type, c), job_id, c))
            asks.sort()
            book = self._books[gpu_type] = (used, asks)
        return book


def _price(problem: Problem, valuation: Valuation, book: _Book, gpu_type: str, k: int,
           limit: float) -> tuple[float, dict[str, int]] | None:
    """(cost, GPUs taken per donor) of ``k`` GPUs of ``gpu_type``; None when they cost ``limit`` or more.

    Only the k lowest first asks can supply the k cheapest GPUs (a holder's next ask is at
    least its last on a concave value curve), so a trial costs O(k log k), not a scan.
    """
    used, first = book.get(gpu_type)
    need = k - max(0, problem.capacity[gpu_type] - used)
    if need <= 0:
        return 0.0, {}
    asks = list(first[:need])
    heapq.heapify(asks)
    cost, takes = 0.0, {}
    while need > 0:
        if not asks:
            return None
        loss, job_id, c = heapq.heappop(asks)
        cost += loss
        if cost >= limit:
            return None
        takes[job_id] = takes.get(job_id, 0) + 1
        need -= 1
        if c - 2 >= book.by_id[job_id].min_gpus:
            heapq.heappush(asks, (_ask(valuation, book.by_id[job_id], gpu_type, c - 1), job_id, c - 1))
    return cost, takes


def _ask(valuation: Valuation, info: JobInfo, gpu_type: str, count: int) -> float:
    return max(0.0, valuation.value(info, gpu_type, count) - valuation.value(info, gpu_type, count - 1))
