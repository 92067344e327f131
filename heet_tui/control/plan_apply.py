"""Carrying out an approved plan, its steps side by side where they can, never twice or half.

All steps are written to the store before the first runs; each is marked ``running`` before
and ``done``/``failed`` after. A controller that dies mid-plan finds the plan ``applying`` on
restart and calls :func:`apply_plan` again: finished steps are skipped and the others are
re-executed, which is safe because a step is stated as a target ("job X on allocation A"),
not as an action, and a step whose target already holds does nothing.

Steps run in an order that frees GPUs before they are claimed: a step waits while its target's
GPUs are held by another job the plan still has to move. Seen: a plan moved job A onto the
GPUs job B held while B moved to an A100; A's step came first (by kind, then name), stopped A,
found B's GPUs in use and failed, and A, stopped, lost its place. Jobs that wait on each other
in a ring (A takes B's GPUs, B takes A's) are broken by stopping one of them first. A step
whose GPUs something outside the plan holds fails before it stops the job, which keeps running.
"""

from __future__ import annotations

import asyncio
import logging

from heet_tui.cluster.aio import cancel_and_wait
from heet_tui.cluster.gpu_users import users_of
from heet_tui.control.drains import drained_hosts
from heet_tui.control.execution import Executor, StepFailed
from heet_tui.control.runtime import gpus_held, judge
from heet_tui.control.store import Store
from heet_tui.control.store_records import StepRecord
from heet_tui.core.job import STARTING, JobState
from heet_tui.core.plan import Change, ChangeKind

log = logging.getLogger(__name__)
PARALLEL_STEPS = 16  # steps under way at once: each is a stop and a launch over SSH, maybe a checkpoint copy


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
    if target is not None and (drained := sorted(set(target.host_names) & drained_hosts(store))):
        # approved before the drain: it launched there a second after "hosts drain", and the next plan moved it off
        raise StepFailed(f"host {', '.join(drained)} was drained after the plan was made: {change.job_id} is left "
                         "as it is, for the next plan to place")
    if target is not None:
        own = gpus_held([run]) if run is not None else {}
        busy = executor.busy_gpus(except_job=change.job_id)
        for host, gpus in target.hosts:
            taken = (busy.get(host, set()) - own.get(host, set())) & set(gpus)
            if taken:
                who = users_of(executor.cluster.host_status(host), taken)
                raise StepFailed(f"GPUs {sorted(taken)} of {host} are still in use"
                                 + (f" by processes heet did not start ({who})" if who else ""))
    if run is not None:
        if target is not None:
            store.try_set_state(change.job_id, JobState.RESIZING, now, f"{_doing(change)} to {target.describe()}")
        # the event names the change: a move read "stopped ...: resize"
        await executor.stop_run(run, change.kind.value if target is not None else "preempt")
    if target is None:
        store.try_set_state(change.job_id, JobState.QUEUED, now, "stopped by the plan; resumes from its checkpoint")
        return "stopped"
    rec = store.job(change.job_id)
    if rec is not None and (rec.cancel_requested or rec.job.state is JobState.CANCELLED):
        # cancelled while it stopped: its stop ends it, no launch (the step read "finished")
        store.try_set_state(change.job_id, JobState.CANCELLED, executor.clock(), "cancelled")
        return "skipped: the job was cancelled while stopping"
    if rec is None or rec.job.state.terminal:  # it may have finished while stopping
        return "skipped: the job finished while stopping"
    if drained := sorted(set(target.host_names) & drained_hosts(store)):  # while it stopped (a slow save)
        store.try_set_state(change.job_id, JobState.QUEUED, executor.clock(),
                            f"stopped by the plan; host {', '.join(drained)} was drained meanwhile: it waits for the "
                            "next plan, and resumes from its checkpoint")
        raise StepFailed(f"host {', '.join(drained)} was drained while {change.job_id} stopped: not launched there; "
                         "the next plan places it")
    new = await executor.launch(change.job_id, target)
    if new.any_exited:  # why, as the job's event says it: "failed" alone sent people to the agent's log
        raise StepFailed(f"launch on {target.describe()} failed: {judge(new)[1]}")
    return f"running generation {new.generation} on {target.describe()}"


def _doing(change: Change) -> str:
    """A move is not a resize: "resizing to 2xT4" read as a size change of a job keeping its size."""
    return "moving" if change.kind is ChangeKind.MIGRATE else "resizing"


def _waits_for(executor: Executor, step: StepRecord, moving: set[str]) -> set[str]:
    """The other jobs still to move that hold GPUs of the step's target now."""
    target = step.change.after
    if target is None:
        return set()
    out = set()
    for job_id in moving - {step.change.job_id}:
        run = executor.runs.get(job_id)
        held = gpus_held([run]) if run is not None else {}
        if any(held.get(host, set()) & set(gpus) for host, gpus in target.hosts):
            out.add(job_id)
    return out


async def _break_ring(executor: Executor, store: Store, pending: list[StepRecord], now: float) -> StepRecord:
    """Every pending step waits on another's job: one job of the ring is stopped so that the others
    can go (its own step then starts it); the step to run next."""
    moving = {step.change.job_id for step in pending}
    # follow the waits from the first until a job comes round again
    by_job = {step.change.job_id: step for step in pending}
    seen: list[str] = []
    step = pending[0]
    while step.change.job_id not in seen:
        seen.append(step.change.job_id)
        step = by_job[min(_waits_for(executor, step, moving))]
    run = executor.runs.get(step.change.job_id)
    if run is not None:
        log.info("plan steps wait on each other in a ring: stopping %s first", step.change.job_id)
        after = step.change.after
        store.try_set_state(step.change.job_id, JobState.RESIZING, now,
                            f"{_doing(step.change)} to {after.describe()}" if after else "stopping")
        await executor.stop_run(run, step.change.kind.value if after else "preempt")
    free = [step for step in pending if not _waits_for(executor, step, moving)]
    return free[0] if free else pending[0]


async def _run_step(executor: Executor, store: Store, plan_id: int, step: StepRecord, clock) -> bool:
    """One step, marked done or failed; whether it was done."""
    change, rec = step.change, store.job(step.change.job_id)
    if change.kind is ChangeKind.START and change.after is not None and rec is not None \
            and rec.job.state is JobState.QUEUED:
        # a checkpoint copy may take a while first: it read "in plan #6 ..., waiting for approval" meanwhile
        store.set_state(change.job_id, JobState.QUEUED, clock(), f"plan #{plan_id}{STARTING}"
                        f"{change.after.describe()} (its checkpoint is copied there first where it lies elsewhere)")
    try:
        message = await execute_change(executor, store, step.change, clock())
    except Exception as error:  # any: one step's unexpected error cancelled its siblings, one launched already
        if isinstance(error, StepFailed):
            exc = error
        else:
            log.exception("plan %d step %d (%s)", plan_id, step.idx, step.change.job_id)
            exc = StepFailed(f"internal error ({type(error).__name__}: {error}); see controller.log")
        log.warning("plan %d step %d (%s): %s", plan_id, step.idx, step.change.job_id, exc)
        store.mark_step(plan_id, step.idx, "failed", clock(), str(exc))
        # the job's own events: why an approved plan did not move it was in controller.log only
        store.add_event(clock(), "plan", f"{step.change.job_id}: plan #{plan_id} failed to "
                        f"{step.change.kind.value} it: {exc}", step.change.job_id)
        job = store.job(step.change.job_id)
        if job is not None and (job.job.state is JobState.RESIZING or STARTING in job.job.message):
            store.try_set_state(step.change.job_id, JobState.QUEUED, clock(), f"plan step failed: {exc}")
        return False
    store.mark_step(plan_id, step.idx, "done", clock(), message)
    return True


async def apply_plan(executor: Executor, store: Store, plan_id: int, clock) -> str:
    """Steps whose targets no other step's job holds run together, each as soon as nothing stands in
    its way: one at a time, a 36-preemption, 85-launch plan took 45 s at a stop a second, with the
    freed GPUs idle and nothing else planned meanwhile (a job's stop grace is up to 30 s)."""
    rec = store.plan(plan_id)
    if rec is None:
        raise ValueError(f"no plan #{plan_id}")
    if rec.status not in ("approved", "applying"):
        raise ValueError(f"plan #{plan_id} is {rec.status}, not approved")
    store.start_applying(plan_id, rec.plan.changes, clock())
    steps = store.steps(plan_id)
    done = sum(step.status == "done" for step in steps)
    failed = sum(step.status == "failed" for step in steps)
    pending = [step for step in steps if step.status not in ("done", "failed")]
    running: dict[asyncio.Task[bool], StepRecord] = {}
    try:
        while pending or running:
            moving = {step.change.job_id for step in (*pending, *running.values())}
            free = [step for step in pending if not _waits_for(executor, step, moving)]
            if not free and not running:
                free = [await _break_ring(executor, store, pending, clock())]
            for step in free[:max(0, PARALLEL_STEPS - len(running))]:
                pending.remove(step)
                store.mark_step(plan_id, step.idx, "running", clock())
                running[asyncio.ensure_future(_run_step(executor, store, plan_id, step, clock))] = step
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                running.pop(task)
                if task.result():
                    done += 1
                else:
                    failed += 1
    finally:  # an error (or the controller stopping) ends the rest too: a restart applies them again
        await cancel_and_wait(list(running), 30.0, "plan step")
    store.set_plan_status(plan_id, "applied" if failed == 0 else "failed", clock())
    summary = f"plan #{plan_id}: {done} step(s) done, {failed} failed"
    if first := next((st for st in store.steps(plan_id) if st.status == "failed"), None):
        summary += f" ({first.change.job_id}: {first.message})"  # `status` and the notice said no more
    store.add_event(clock(), "plan", summary)
    return summary
