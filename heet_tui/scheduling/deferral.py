"""Leave a new job waiting when a faster type frees soon enough to finish it sooner.

A round's value (completion rate) is zero for a job without GPUs, so Heet starts every job
it can, on whatever is free. Seen on a cluster of two A100s and four T4s: two short jobs went
to one T4 each, five times slower, to finish in 1m09s, when the A100s freed within 18 s and
would have finished them in 36 s; the plan's own prediction said 48 s of average JCT against
37 s for leaving them to queue.

So, after a plan is made, each job it starts (one that held no GPUs) on a type slower than
its best is tried without that start, the job queueing for the GPUs as ``evaluate`` models it
(its smallest count, on the type where it would finish first once such GPUs are free); the
start is dropped when the plan's total predicted JCT falls. Jobs that waited long already
are not deferred again: the prediction that a GPU frees soon can keep slipping. "Long" was
30 minutes, and at scale four 600-step jobs were held for A100s "predicted to free soon" for
18 minutes and more while P100s that would have finished them in 12 sat free; a job is now
deferred only until it has waited ``PATIENCE`` times the wait it is deferred for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.evaluate import predict_with_starts
from heet_tui.scheduling.problem import Problem

MAX_TRIALS = 8  # starts tried per round, slowest first: each costs one prediction of the plan
PATIENCE = 3.0  # a job is deferred until it has waited this many times ``within_s``


def defer_slow_starts(problem: Problem, allocations: Mapping[str, Allocation], max_wait_s: float = 1800.0,
                      within_s: float = 120.0) -> dict[str, Allocation]:
    """``allocations`` less the starts that waiting would beat (module docstring)."""
    out = dict(allocations)
    candidates = []
    for job_id, alloc in allocations.items():
        info = problem.by_id[job_id]
        current = info.view.current
        if (current is not None and current.num_gpus) or not alloc.num_gpus \
                or info.view.age_s > min(max_wait_s, PATIENCE * within_s):
            continue
        got = problem.throughput_at(info.view, alloc.gpu_type, alloc.placement)
        best = max((problem.throughput(info, t, alloc.num_gpus) for t in info.caps), default=0.0)
        if got > 0 and best > got:
            candidates.append((got / best, job_id, best))
    if not candidates:
        return out
    total, base, _ = _total_jct(problem, out)
    # the jobs the plan finishes: a held job (or one nothing can run) finishes in neither, and
    # counted as never it made every total infinite, so no start was ever deferred
    counted = {j for j, t in base.items() if t is not None}
    total = _summed(base, counted)
    for _, job_id, best in sorted(candidates)[:MAX_TRIALS]:
        trial = {j: a for j, a in out.items() if j != job_id}
        _, done, starts = _total_jct(problem, trial)
        score = _summed(done, counted)
        info = problem.by_id[job_id]
        waits = (done[job_id] or math.inf) - info.view.restart_cost_s - info.view.finish_time_scale * \
            problem.remaining_samples(info) / best  # when the faster GPUs free, as predicted
        # the wait must be for GPUs that free later: a queue predicted to start it now, on GPUs free
        # already (a V100 beside the T4 dropped), is a start no plan then made, and the V100 sat
        # idle for minutes beside the job "held for faster GPUs"
        later = job_id in starts and starts[job_id][0] > 0
        if score < total and waits <= within_s and later:
            out, total = trial, score
    return out


def _summed(done: Mapping[str, float | None], counted: set[str]) -> float:
    """The counted jobs' completions summed; one that would no longer finish makes it never."""
    return sum(math.inf if done.get(j) is None else done[j] for j in counted)


def _total_jct(problem: Problem, allocations: Mapping[str, Allocation]
               ) -> tuple[float, dict[str, float | None], dict[str, tuple[float, str]]]:
    """Summed predicted completion of every job (a job that could not finish counts as never),
    each one's, and where and when the queue starts those left waiting."""
    done, starts = predict_with_starts(problem, allocations)
    return sum(math.inf if t is None else t for t in done.values()), done, starts
