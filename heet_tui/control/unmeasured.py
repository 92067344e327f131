"""Jobs planned without a throughput measurement, and how a profiling run ends without one.

heet-tui measures a job from the ``@heet-progress`` lines its script prints (docs/TRAINING.md).
A script that prints none must still run. Before, its profiling runs ended with nothing
measured, the job went back to the queue, was profiled again, and never got a plan, round after
round; ``heet-tui run --no-profile`` never planned any job, for the same reason. Now:

* a profiling run without enough reports after ``ExecOptions.profile_timeout_s`` (or silent for
  its job's shorter ``stall_timeout``) is stopped
  (a script that prints nothing may train for hours on its profiling GPU);
* a job whose profiling runs all ended without a measurement is marked *unmeasured* (in the
  store, so a restarted controller does not profile it again) and planned with
  ``ThroughputBook.nominal_function`` and unknown remaining work, which the policy counts in
  the GPU-seconds the job has had, as least-attained-service scheduling does;
* with profiling off, every job without a measurement is planned that way.

Once the job reports throughput while it runs, its measurements take over. A plan shows no
throughput or completion time for such a job: the nominal units are not samples/s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from heet_tui.control.runtime import Run
from heet_tui.control.stalls import DEFAULT_STALL_S, silent_for, stall_limit
from heet_tui.control.store import Store
from heet_tui.core.plan import PredictedEffect

SETTING = "unmeasured"
MESSAGE = ("its profiling runs measured no throughput (the script printed fewer than two readable @heet-progress "
           "lines, see docs/TRAINING.md); it is planned without measurements")
TIMED_OUT = "profiling: no throughput reported in time"


def unmeasured_ids(store: Store) -> set[str]:
    return set(json.loads(store.setting(SETTING) or "[]"))


def mark_unmeasured(store: Store, job_id: str) -> None:
    live = {rec.job.id for rec in store.jobs(include_terminal=False)}
    store.set_setting(SETTING, json.dumps(sorted((unmeasured_ids(store) & live) | {job_id})))


def overdue_profiling(profiles: Mapping[str, list[Run]], now: float, timeout_s: float,
                      stall_default_s: float = DEFAULT_STALL_S) -> list[Run]:
    """Profiling runs that have had ``timeout_s`` to measure the job and have not, not yet being
    stopped; and those silent for longer than their job's ``stall_timeout`` (a job that says it
    is hung after 20 s of silence held two GPUs for ten minutes of profiling). A run counts as
    measured when its rates settled, not when it reported twice: one that reported twice and
    then hung (its second rate alone measures nothing) held its GPUs until cancelled."""
    def overdue(run: Run) -> bool:
        limit = stall_limit(run.spec, stall_default_s) if run.spec is not None else None
        return now - run.started_at >= timeout_s or (limit is not None and silent_for(run, now) >= limit)

    return [run for runs in profiles.values() for run in runs
            if run.stop_reason is None and run.observed_at is None and overdue(run)]


def overdue_why(run: Run, now: float, stall_default_s: float = DEFAULT_STALL_S) -> str:
    """Why ``overdue_profiling`` stops ``run``, for the job's events: a run that reported twice and
    then hung was stopped without a word, and its job's profiling took minutes unexplained."""
    limit = stall_limit(run.spec, stall_default_s) if run.spec is not None else None
    if limit is not None and (quiet := silent_for(run, now)) >= limit:
        return f"no progress line for {quiet:.0f} s (its stall_timeout is {limit:g} s)"
    return f"its speed did not settle within {now - run.started_at:.0f} s"


def silent(run: Run) -> bool:
    """A profiling run that ended with nothing measured: it needs a report beyond its first."""
    return run.profiling and run.reports < 2 and (run.stop_reason is None or run.stop_reason == TIMED_OUT)


def unreported_gpu_s(run: Run | None, now: float) -> float:
    """GPU-seconds of a run that never reported (its attained service counts nowhere else)."""
    if run is None or run.reports or run.profiling:
        return 0.0
    return max(0.0, now - run.started_at) * run.alloc.num_gpus


def hide_nominal(effect: PredictedEffect, ids: set[str]) -> PredictedEffect:
    """The plan's prediction without the nominal figures of unmeasured jobs (unknown, not samples/s).

    The averages go too: they would mix those figures in, and an average over the other jobs
    only would not compare with the plan's "before".
    """
    if not ids & {p.job_id for p in effect.jobs}:
        return effect
    jobs = tuple(replace(p, throughput_before=0.0, throughput_after=0.0, completion_s=None) if p.job_id in ids
                 else p for p in effect.jobs)
    return PredictedEffect(jobs, None, None)
