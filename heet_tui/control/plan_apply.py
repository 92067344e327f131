"""Carrying out an approved plan, step by step, so that it is never applied twice or half.

All steps are written to the store before the first runs; each is marked ``running`` before
and ``done``/``failed`` after. A controller that dies mid-plan finds the plan ``applying`` on
restart and calls :func:`apply_plan` again: finished steps are skipped and the others are
re-executed, which is safe because a step is stated as a target ("job X on allocation A"),
not as an action, and a step whose target already holds does nothing.
"""

from __future__ import annotations

import logging

from heet_tui.control.execution import Executor, StepFailed
from heet_tui.control.store import Store
from heet_tui.core.job import JobState
from heet_tui.core.plan import Change

log = logging.getLogger(__name__)


async def execute_change(executor: Executor, store: Store, change: Change, now: float) -> str:
    """Bring one job to ``change.after`` from wherever it really is now."""
    rec = store.job(change.job_id)
    if rec is None or rec.job.state.terminal:
        return "skipped: the job has finished"
    if executor.in_profiling_round(change.job_id):
        raise StepFailed(f"job {change.job_id} is being profiled")
    run = executor.runs.get(change.job_id)
    target = change.after
    if run is not None and target is not None and run.alloc == target and not run.any_exited:
        return "already in place"
    if run is not None:
        if target is not None:
            store.try_set_state(change.job_id, JobState.RESIZING, now, f"resizing to {target.describe()}")
        await executor.stop_run(run, "resize" if target is not None else "preempt")
    if target is None:
        store.try_set_state(change.job_id, JobState.QUEUED, now, "stopped by the plan; resumes from its checkpoint")
        return "stopped"
    rec = store.job(change.job_id)
    if rec is None or rec.job.state.terminal:  # it may have finished while stopping
        return "skipped: the job finished while stopping"
    new = await executor.launch(change.job_id, target)
    if new.any_exited:
        raise StepFailed(f"launch on {target.describe()} failed")
    return f"running generation {new.generation} on {target.describe()}"


async def apply_plan(executor: Executor, store: Store, plan_id: int, clock) -> str:
    rec = store.plan(plan_id)
    if rec is None:
        raise ValueError(f"no plan #{plan_id}")
    if rec.status not in ("approved", "applying"):
        raise ValueError(f"plan #{plan_id} is {rec.status}, not approved")
    store.start_applying(plan_id, rec.plan.changes, clock())
    done = failed = 0
    for step in store.steps(plan_id):
        if step.status in ("done", "failed"):
            done += step.status == "done"
            failed += step.status == "failed"
            continue
        store.mark_step(plan_id, step.idx, "running", clock())
        try:
            message = await execute_change(executor, store, step.change, clock())
            store.mark_step(plan_id, step.idx, "done", clock(), message)
            done += 1
        except StepFailed as exc:
            log.warning("plan %d step %d (%s): %s", plan_id, step.idx, step.change.job_id, exc)
            store.mark_step(plan_id, step.idx, "failed", clock(), str(exc))
            job = store.job(step.change.job_id)
            if job is not None and job.job.state is JobState.RESIZING:
                store.try_set_state(step.change.job_id, JobState.QUEUED, clock(), f"plan step failed: {exc}")
            failed += 1
    store.set_plan_status(plan_id, "applied" if failed == 0 else "failed", clock())
    summary = f"plan #{plan_id}: {done} step(s) done, {failed} failed"
    store.add_event(clock(), "plan", summary)
    return summary
