"""Each round's plan: proposed, kept, remade, auto-approved or held, and why.

A proposed plan waits for a person, who needs it to stand still while they read it. At lab scale
(hundreds of jobs on dozens of like hosts) running jobs' reports move the predictions a little
every round, the policy's near-ties flip (a job between 2xT4 and 1xV100, GPU 1 or 2 of a host),
and a new plan superseded the one on screen every half second: eight approvals of eight were
refused as "superseded", and the store kept every one of them. So, without auto-approve, a
pending plan stands until what it was made from changes (``plan_basis``), not its figures.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from heet_tui.control import planning
from heet_tui.control.runtime import HOST_CANNOT_RECORD, launch_blocked
from heet_tui.control.waiting import PlanMade
from heet_tui.core.gpu import type_allowed
from heet_tui.core.job import LEFT_QUEUED, JobState
from heet_tui.core.plan import count_changes
from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling.problem import missing_pins, pinned_off_types

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.throughput import ThroughputBook

RETRY_FAILED_PLAN_S = 60.0  # auto-approve does not apply a plan that just failed again before this
HOST_RECHECK_S = 5.0  # ... unless a host's full disk failed it and the host says it writes again (heartbeats lag)
# a standing plan's figures are written again once this far off: at planning's 10% its countdown
# stood still for 45 s, then jumped
STANDING_DRIFT = 0.02


def plan_basis(inputs: list[planning.JobInput], cluster: ClusterView, policy: str, book: ThroughputBook) -> str:
    """What a plan is made from, less the figures that move every round: the jobs, their states,
    places, ranges and edits, the hosts and their free GPUs, the policy, and which cells of each job
    are measured (a first measurement on a type is news; the hundredth report of one is not)."""
    jobs = sorted((j.id, j.state.value, j.min_gpus, j.max_gpus, j.gpu_types, j.priority, repr(j.current),
                   repr(j.constraints), j.measured, sorted(j.crashed_sizes), sorted(book.measured(j.id)))
                  for j in inputs)
    return hashlib.sha256(repr((policy, jobs, cluster)).encode()).hexdigest()


def out_of_reach_edits(inputs: list[planning.JobInput], cluster: ClusterView) -> dict[str, str]:
    """Jobs whose edit on the Plan screen pins them to a GPU type or hosts no ready host offers now
    (removed from the hosts file, or reconnecting), and why. Such an edit made planning fail for
    every job, round after round, until someone dropped it."""
    types, names = {h.gpu_type for h in cluster.hosts}, {h.name for h in cluster.hosts}
    host_types = {h.name: h.gpu_type for h in cluster.hosts}
    out = {}
    for job in inputs:
        missing_type, missing = missing_pins(job.constraints, types, names)
        pinned = job.constraints.pinned_type
        if pinned is not None and not type_allowed(pinned, job.gpu_types):  # the spec changed since
            out[job.id] = f"your edit pins it to {pinned}, which its spec leaves out (gpu_types: {', '.join(job.gpu_types)})"
        elif off := pinned_off_types(job.constraints.pinned_hosts, lambda t, types=job.gpu_types: type_allowed(t, types),
                                     host_types):
            out[job.id] = f"your edit pins it to {off}, whose GPUs its spec leaves out"
        elif missing_type is not None:
            out[job.id] = f"your edit pins it to {missing_type}, which no ready host has now"
        elif missing:
            out[job.id] = f"your edit pins it to {', '.join(missing)}, not ready now"
    return out


def _set_aside(ctl: Controller, stuck: dict[str, str]) -> None:
    """Say why on each queued job left out (a running one keeps its GPUs: the plan does not weigh it)."""
    for job_id, why in stuck.items():
        rec = ctl.store.job(job_id)
        if rec is not None and rec.job.state is JobState.QUEUED:
            message = f"{LEFT_QUEUED}{why}; it waits for it (d on the Jobs screen drops the edit)"
            if rec.job.message != message:
                ctl.store.try_set_state(job_id, JobState.QUEUED, ctl.clock(), message)


def _standing(ctl: Controller, pending, inputs: list[planning.JobInput], cluster: ClusterView,
              weighed: frozenset[str]) -> PlanMade:
    """The pending plan that stands (what it was made from has not changed), its figures predicted
    again for its same moves: it stood with the ones of when it was proposed, and a shrink of a
    job 95% done still read "+108%, completes in 38 s" a minute and a half on, approvable."""
    try:
        fresh = ctl.reevaluate(pending.plan, inputs, cluster)
    except ValueError:  # the moves no longer fit: the next change of basis replaces it
        fresh = pending.plan
    if planning.drifted(pending.plan.effect, fresh.effect, STANDING_DRIFT):
        ctl.store.refresh_proposed_plan(pending.id, fresh)
    return replace(PlanMade.of(fresh, weighed), plan_id=pending.id)


def _withdraw(ctl: Controller, plan_id: int) -> None:
    ctl.store.set_plan_status(plan_id, "superseded", ctl.clock())
    ctl.pending_plan_id = None


def propose(ctl: Controller) -> None:
    inputs = ctl.job_inputs()
    cluster = ctl.cluster_view(planned={j.id for j in inputs})
    if stuck := out_of_reach_edits(inputs, cluster):
        inputs = [j for j in inputs if j.id not in stuck]
        _set_aside(ctl, stuck)
    try:
        plan = ctl.replan_from(inputs, cluster)
    except ValueError as exc:
        ctl.notices.append(f"planning: {exc}")
        return
    weighed = frozenset(j.id for j in inputs)
    ctl.plan_made = made = PlanMade.of(plan, weighed) if plan else None
    basis = plan_basis(inputs, cluster, ctl.policy_name, ctl.book)
    record = ctl.store.plan(ctl.pending_plan_id) if ctl.pending_plan_id else None
    pending = record if record is not None and record.status == "proposed" else None
    # the one being read stands while only figures moved, even against "no change" (a near-tie too)
    stands = pending is not None and not ctl.auto_approve and basis == ctl.pending_basis
    if made is None or made.plan.is_empty:
        if stands and pending is not None and made is not None:
            ctl.plan_made = _standing(ctl, pending, inputs, cluster, weighed)
        elif ctl.pending_plan_id is not None:
            _withdraw(ctl, ctl.pending_plan_id)
        return
    plan, sig = made.plan, planning.signature(made.plan)
    shown = planning.signature(pending.plan) if pending is not None else None
    if pending is not None and shown == sig:
        plan_id, ctl.pending_basis = pending.id, basis  # the same moves: it stands under what it is made from now
        if planning.drifted(pending.plan.effect, plan.effect):  # e.g. a job profiled since waits in it
            ctl.store.refresh_proposed_plan(plan_id, replace(plan, created_at=pending.plan.created_at))
    elif stands and pending is not None and shown is not None:
        made = _standing(ctl, pending, inputs, cluster, weighed)
        plan, sig, plan_id = made.plan, shown, pending.id
    elif planning.shape(plan) in ctl.rejected:
        ctl.plan_made = replace(made, rejected=True)
        if pending is not None:  # made before what changed since; its jobs said "rejected" beside it
            _withdraw(ctl, pending.id)
        return
    else:
        plan_id = ctl.pending_plan_id = ctl.store.add_plan(plan)
        ctl.pending_basis = basis
    ctl.plan_made = replace(made, plan_id=plan_id)
    failed_at, why = ctl.failed_plans.get(sig, (None, ""))
    if failed_at is not None and HOST_CANNOT_RECORD in why and ctl.clock() - failed_at >= HOST_RECHECK_S \
            and not launch_blocked(ctl.cluster.status()) & {h for a in plan.allocations.values() for h in a.host_names}:
        failed_at = None  # it failed on a host's full disk, which takes writes again: it waited out the minute
    if failed_at is not None and ctl.clock() - failed_at < RETRY_FAILED_PLAN_S:
        # the same plan just failed: not again at once, in a loop (the user may approve it); why, or
        # a job waiting for the host with its checkpoint said so in controller.log only
        at, again = (time.strftime("%H:%M:%S", time.localtime(t)) for t in (failed_at,
                                                                            failed_at + RETRY_FAILED_PLAN_S))
        ctl.held_why = f"the same plan failed at {at} ({why}); auto-approve tries it again at {again}"
        return
    unmeasured = frozenset(j.id for j in inputs if not j.measured)
    misplaced = planning.outside_spec((r.job_id, r.spec, r.alloc) for r in ctl.executor.runs.values() if r.spec)
    # a restart the user asked for (a hold or pin on the Plan screen) is not one to wait on: "it restarts
    # bob-long-3, started less than 120 s ago" was said of the hold the user had just made
    edits = {j.id: j.constraints for j in inputs if j.constraints.is_set}
    recent = frozenset(r.job_id for r in ctl.executor.runs.values()  # adopted ones: started who knows when
                       if r.start_samples is not None and ctl.clock() - r.started_at < planning.SETTLE_S)
    applied, why = planning.auto_verdict(plan, ctl.book, unmeasured, ctl.drained(), ctl.opt.gain_threshold, misplaced,
                                         recent, {j.id: j.priority for j in inputs}, edits)
    ctl.held_why = None if applied else why
    if ctl.auto_approve and ctl.held_why is None:
        ctl.store.set_plan_status(plan_id, "approved", ctl.clock())
        ctl.store.add_event(ctl.clock(), "plan", f"plan #{plan_id} auto-approved: {why}")
        ctl.start_apply(plan_id)
    elif ctl.auto_approve and (starts := planning.free_starts(plan)) is not None:
        now = ctl.clock()
        started = ctl.store.add_plan(starts)
        ctl.store.set_plan_status(started, "approved", now)
        ctl.store.add_event(now, "plan", f"plan #{started} auto-approved: the {count_changes(starts.changes)} of plan "
                            f"#{plan_id} onto free GPUs; its other changes are held ({ctl.held_why})")
        ctl.start_apply(started)

