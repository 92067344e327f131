"""Predict what a plan does: per-job throughput before/after, completion, restart pause, avg JCT.

Works for any plan, including one the user edited by hand, because it only reads the plan's
allocations and the jobs' own throughput functions at the real placements (GPUs per host),
not anything a policy computed on the way.

Model (deliberately simple and stated): a job holding GPUs runs at its throughput for the
placement it gets, after a pause of its restart cost when the plan changes its allocation
(start, grow, shrink, migrate). Jobs left without GPUs queue in submission order: each takes,
on its smallest count, the allowed type where it would finish first once that many of the
type's GPUs are free (free now, or freed when their holder is predicted to finish), and holds
them until it is done. (Before, every waiting job was assumed to start at once on its best
type, whatever the capacity: seven jobs on two A100s, so "without the plan" read 56 s against
the plan's 77 s for the same shape of schedule.) JCT is age
plus predicted time to completion; a job's ``finish_time_scale`` corrects its training time
for statistical efficiency that will change, and throughput is reported in raw samples/s
(``statistical_efficiency``): both matter for the simulator's jobs only, 1 for real ones.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect, classify
from heet_tui.core.sched_input import ClusterView, JobView
from heet_tui.scheduling.problem import JobInfo, Problem


def evaluate(plan: Plan | Mapping[str, Allocation], cluster: ClusterView, jobs: Sequence[JobView],
             now: float = 0.0) -> PredictedEffect:
    """The predicted effect of ``plan`` (a Plan or a plain job -> Allocation mapping)."""
    del now  # predictions are relative to now; kept for a uniform signature
    allocations = plan.allocations if isinstance(plan, Plan) else plan
    return evaluate_problem(Problem(cluster, jobs), allocations)


def evaluate_problem(problem: Problem, allocations: Mapping[str, Allocation]) -> PredictedEffect:
    """``evaluate`` on an already-built Problem (policies reuse its throughput memo)."""
    _check_allocations(allocations, problem)
    starts: dict[str, tuple[float, str]] = {}
    after = _predict(problem, allocations, count_restarts=True, starts=starts)
    before = _predict(problem, problem.current, count_restarts=False)
    preds = []
    for info in problem.infos:
        thr_after, pause, done_after = after[info.id]
        raw = 1.0 / info.view.statistical_efficiency  # shown as the samples/s a job reports
        start = starts.get(info.id)
        alloc = allocations.get(info.id)
        preds.append(JobPrediction(info.id, before[info.id][0] * raw, thr_after * raw, done_after, pause,
                                   *(start or (None, None)),
                                   placed_on=alloc.describe() if alloc is not None and alloc.num_gpus else None))
    return PredictedEffect(tuple(preds), _avg_jct(problem, after), _avg_jct(problem, before))


def predict_completions(problem: Problem, allocations: Mapping[str, Allocation]) -> dict[str, float | None]:
    """job id -> seconds to completion under ``allocations`` (restarts counted), None: never."""
    return {job_id: done for job_id, (_, _, done) in _predict(problem, allocations, count_restarts=True).items()}


def predict_with_starts(problem: Problem, allocations: Mapping[str, Allocation]
                        ) -> tuple[dict[str, float | None], dict[str, tuple[float, str]]]:
    """``predict_completions``, and for each job left waiting when and on which type the queue
    is predicted to start it."""
    starts: dict[str, tuple[float, str]] = {}
    done = {job_id: d for job_id, (_, _, d) in _predict(problem, allocations, True, starts).items()}
    return done, starts


def _predict(problem: Problem, allocations: Mapping[str, Allocation], count_restarts: bool,
             starts: dict[str, tuple[float, str]] | None = None) -> dict[str, tuple[float, float, float | None]]:
    """job id -> (throughput, restart pause, seconds to completion or None); ``starts`` gets,
    for each job left waiting, when and on which type the queue is predicted to start it."""
    out: dict[str, tuple[float, float, float | None]] = {}
    free_at: dict[str, list[float]] = {t: [] for t in problem.types}  # per type, when each GPU frees: sorted
    waiting = []
    for info in problem.infos:
        alloc = allocations.get(info.id)
        if alloc is None or alloc.num_gpus == 0:
            waiting.append(info)
            continue
        thr = problem.throughput_at(info.view, alloc.gpu_type, alloc.placement)
        kind = classify(info.view.current, alloc) if count_restarts else None
        pause = info.view.restart_cost_s if kind is not None else 0.0
        done = pause + _work_s(problem, info, thr) if thr > 0 else None
        out[info.id] = (thr, pause, done)
        if alloc.gpu_type in free_at:
            free_at[alloc.gpu_type] += [math.inf if done is None else done] * alloc.num_gpus
    for gpu_type, times in free_at.items():  # so far the held GPUs: the rest are free now
        times += [0.0] * max(0, problem.capacity[gpu_type] - len(times))
        times.sort()
    waiting.sort(key=lambda info: (info.view.submitted_at, info.id))
    for info in waiting:
        best: tuple[float, str] | None = None
        for gpu_type in info.caps:
            times, k = free_at[gpu_type], info.min_gpus
            thr = problem.throughput(info, gpu_type, k)
            if thr <= 0 or len(times) < k or math.isinf(times[k - 1]):
                continue
            done = times[k - 1] + info.view.restart_cost_s + _work_s(problem, info, thr)
            if best is None or done < best[0]:
                best = (done, gpu_type)
        out[info.id] = (0.0, 0.0, best[0] if best else None)
        if best is not None:  # it holds the k GPUs that free first until it is done
            times = free_at[best[1]]
            if starts is not None:
                starts[info.id] = (times[info.min_gpus - 1], best[1])
            del times[:info.min_gpus]
            at = bisect.bisect_left(times, best[0])
            times[at:at] = [best[0]] * info.min_gpus
    return out


def _work_s(problem: Problem, info: JobInfo, throughput: float) -> float:
    """Training seconds left at ``throughput`` (the job's own correction for changing efficiency)."""
    return info.view.finish_time_scale * problem.remaining_samples(info) / throughput


def _avg_jct(problem: Problem, pred: Mapping[str, tuple[float, float, float | None]]) -> float | None:
    jcts = [info.view.age_s + pred[info.id][2] for info in problem.infos if pred[info.id][2] is not None]
    return sum(jcts) / len(jcts) if jcts else None


def _check_allocations(allocations: Mapping[str, Allocation], problem: Problem) -> None:
    """Refuse a plan that names unknown jobs/hosts, mixes types or gives a GPU twice."""
    used: set[tuple[str, int]] = set()
    for job_id, alloc in allocations.items():
        if job_id not in problem.by_id:
            raise ValueError(f"plan: allocation for unknown job {job_id!r}")
        for host, gpus in alloc.hosts:
            if host not in problem.usable:
                raise ValueError(f"plan: job {job_id!r} is placed on unknown host {host!r}")
            host_type = problem.host_type(host)
            if host_type != alloc.gpu_type:
                raise ValueError(f"plan: job {job_id!r} wants {alloc.gpu_type} GPUs but host {host!r} has {host_type}")
            for g in gpus:
                if (host, g) in used:
                    raise ValueError(f"plan: GPU {g} of host {host!r} is given to two jobs")
                used.add((host, g))
