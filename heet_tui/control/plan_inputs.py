"""Which jobs a plan is made for, and what each brings: its remaining work, restart cost and limits.

Split from ``controller.py``: every reason a job sits out a round's plan (profiled first, backing
off after a crash, its checkpoint's host away, its run ending or on a host that may come back)
lives here, beside the figures the policy weighs for the jobs that stay in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.control import planning
from heet_tui.control.newer_copies import runs_elsewhere
from heet_tui.control.profiling_rounds import waits_for_profiling
from heet_tui.control.restart_costs import cost_of, ended_twin_costs, restart_costs
from heet_tui.control.runtime import launch_blocked
from heet_tui.control.unmeasured import unmeasured_ids, unreported_gpu_s
from heet_tui.control.user_constraints import user_constraints
from heet_tui.core.job import PROFILE_WAITING, Job
from heet_tui.core.sched_input import Constraints

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller


RUN_BY_NEWER_COPY = ("held: a newer copy of this state store runs it (this store is a restored backup, or a copy; "
                     "heet-tui status names the host); it starts here once that run ends")


def job_inputs(ctl: Controller, overrides: dict[str, Constraints] | None = None) -> list[planning.JobInput]:
    """Jobs to plan: measured ones, and those that cannot be (control/unmeasured.py)."""
    constraints = user_constraints(ctl.store) | (overrides or {})
    out, now = [], ctl.clock()
    unmeasured, restart_cost, ended_cost = unmeasured_ids(ctl.store), restart_costs(ctl.store), ended_twin_costs(
        ctl.store)
    crashed = ctl.executor.crashed_sizes  # a size a twin could not run at, this job cannot either
    held = (away := ctl.host_grace.holding()) | launch_blocked(ctl.cluster.status())
    records = ctl.store.jobs(include_terminal=False)
    priority = {rec.job.id: rec.job.spec.priority for rec in records}  # read once: a round asks per queued job
    for rec in records:
        job, run = rec.job, ctl.executor.runs.get(rec.job.id)
        if job.state not in planning.SCHEDULABLE or waits_for_profiling(ctl, job.id, run is not None):
            continue
        if runs_elsewhere(ctl.cluster, ctl.store, ctl.executor.newer_copies, job):
            if run is None and job.message != RUN_BY_NEWER_COPY:  # it read "resumes from its checkpoint", for good
                ctl.store.try_set_state(job.id, job.state, now, RUN_BY_NEWER_COPY)
            continue
        measured = bool(ctl.book.measured(job.id))
        if run is None and ctl.opt.profile and not (measured or job.id in unmeasured or job.spec.min_gpus > 1) \
                and not _outranks_a_run(ctl, job, priority):
            continue  # profiled first (on one GPU: a job that needs more is measured by its own runs)
        if run is None and ctl.executor.backoff_until.get(job.id, 0) > now:
            continue
        if run is None and ctl.executor.checkpoints.out_of_reach(job.id, away, ctl.executor.hosts.hosts):
            continue  # its checkpoint's host may come back: not restarted from nothing elsewhere
        if run is not None and run.any_exited:
            continue  # ending: judged once its last rank is reported
        if run is not None and {r.host for r in run.ranks.values()} & held:
            continue  # its host may come back (or launch again) with it still running: not moved on a guess
        spec, total, mates = job.spec, job.spec.target_samples, ctl.book.class_mates(job.id)
        out.append(planning.JobInput(
            job.id, job.state, spec.min_gpus, spec.max_gpus, spec.gpu_types, spec.priority, job.submitted_at,
            job.attained_gpu_s + unreported_gpu_s(run, now), max(0.0, total - job.samples_done),
            run.alloc if run else None, constraints.get(job.id, Constraints()), measured,
            cost_of(job.id, restart_cost, mates, ended_twins=ended_cost.get((spec.model, spec.batch_size))),
            frozenset().union(*(crashed.get(j, ()) for j in {job.id} | mates))))
    return out



def _outranks_a_run(ctl: Controller, job: Job, priority: dict[str, int]) -> bool:
    """A new job left waiting for an idle GPU to be profiled on, while a job of lower priority holds
    GPUs it may use: planned unmeasured, so that the plan can give it those GPUs (its own runs then
    measure it). It waited for one to free by itself: nothing stops a job to profile another."""
    if not job.message.startswith(PROFILE_WAITING):
        return False
    return any(job.spec.allows(run.alloc.gpu_type) and priority.get(other, job.spec.priority) < job.spec.priority
               for other, run in ctl.executor.runs.items())
