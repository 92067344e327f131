"""What each UI/CLI intent does to the controller; every refusal is a ``ValueError`` with a message."""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

from heet_tui.cluster import ClusterError
from heet_tui.config.errors import ConfigError
from heet_tui.config.job_hints import submit_hints
from heet_tui.config.job_spec import load_job_specs, spec_file, spec_paths
from heet_tui.control import planning
from heet_tui.control.checkpoint_dirs import CheckpointDirInUse
from heet_tui.control.codec import constraints_to_obj
from heet_tui.control.drains import drain_by_hand
from heet_tui.control.edit_room import refuse_too_big
from heet_tui.control.host_loss import left_out_of_reach
from heet_tui.control.job_update import apply_update, planned_updates
from heet_tui.control.remembered import remember_rejections
from heet_tui.control.retry import retry_job
from heet_tui.control.store import StoreWriteError
from heet_tui.control.user_constraints import PendingEdits
from heet_tui.core.intents import (
    WARNING_SEP,
    ApprovePlan,
    CancelJob,
    ConnectHost,
    DrainHost,
    DropEdit,
    EditJob,
    Intent,
    RejectPlan,
    Replan,
    RetryJob,
    SetAutoApprove,
    SetPolicy,
    SubmitJob,
    TrustHostKey,
    UpdateJobs,
)
from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller


class IntentHandler:
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.edits = PendingEdits(ctl.store)

    async def handle(self, intent: Intent) -> str:
        method = getattr(self, "_" + type(intent).__name__, None)
        if method is None:
            raise ValueError(f"unsupported intent {type(intent).__name__}")
        if self.ctl.opt.read_only:
            raise ValueError(f"this controller (pid {os.getpid()}) was started read-only: quit that TUI and "
                             "start heet-tui or heet-tui run on this state to change anything")
        try:
            return await method(intent)
        except StoreWriteError as exc:  # a refusal to say as such: it read "failed: StoreWriteError: state store..."
            # in the log too: its event ("cancel requested") was logged before the store refused it
            logging.getLogger(__name__).warning("%s refused: %s", type(intent).__name__, exc)
            self.ctl.store_health.failed(exc)  # the outage begins here for an idle controller: said everywhere
            raise ValueError(f"{exc}: refused while the state store takes no writes (the controller records "
                             "each change before it makes it)") from None

    def _pending(self, plan_id: int):
        ctl = self.ctl
        rec = ctl.store.plan(plan_id)
        if rec is None:
            raise ValueError(f"no plan #{plan_id}")
        if rec.status != "proposed":
            raise ValueError(f"plan #{plan_id} is {rec.status}, not pending")
        if plan_id != ctl.pending_plan_id:
            raise ValueError(f"plan #{plan_id} was superseded by plan #{ctl.pending_plan_id}")
        return rec

    async def _ApprovePlan(self, intent: ApprovePlan) -> str:
        ctl = self.ctl
        rec = self._pending(intent.plan_id)
        if ctl.applying is not None and not ctl.applying.done():
            raise ValueError("another plan is being applied; wait for it to finish")
        current = {j: r.alloc for j, r in ctl.executor.runs.items()}
        stale = [c.job_id for c in rec.plan.changes if current.get(c.job_id) != c.before]
        # a host drained since the plan was made (heet-tui hosts drain, then plan approve, within a round)
        drained = sorted({h for c in rec.plan.changes if c.after is not None for h in c.after.host_names
                          if h in ctl.drained() and (c.before is None or h not in c.before.host_names)})
        if stale or drained:
            ctl.store.set_plan_status(rec.id, "superseded", ctl.clock())
            ctl.pending_plan_id = None
            why = f"jobs {', '.join(stale)} changed" if stale else f"it puts jobs on {', '.join(drained)}, drained since"
            raise ValueError(f"plan #{rec.id} is out of date ({why}); a new plan follows")
        ctl.store.set_plan_status(rec.id, "approved", ctl.clock())
        self.edits.commit()
        ctl.store.add_event(ctl.clock(), "plan", f"plan #{rec.id} approved")
        ctl.start_apply(rec.id)
        return f"plan #{rec.id} approved: applying {len(rec.plan.changes)} change(s)"

    async def _RejectPlan(self, intent: RejectPlan) -> str:

        ctl = self.ctl
        rec = self._pending(intent.plan_id)
        ctl.store.set_plan_status(rec.id, "rejected", ctl.clock())
        ctl.store.add_event(ctl.clock(), "plan", f"plan #{rec.id} rejected")
        ctl.rejected.add(planning.shape(rec.plan))
        remember_rejections(ctl.store, ctl.rejected)
        ctl.pending_plan_id = None
        undone = self.edits.undo()
        for job_id, c in undone.items():
            ctl.store.add_event(ctl.clock(), "update", f"{job_id}: edit on the Plan screen ({c.describe() or 'none'}) "
                                f"taken back with plan #{rec.id}", job_id)
        if undone:
            ctl.poke()  # the plan made without them is not the one rejected: propose it now
        if undone:  # "not proposed again unless something changes", and the next plan came a second later
            return (f"plan #{rec.id} rejected; your edit(s) to {', '.join(undone)} taken back, so the plan made "
                    "without them is proposed next (reject that one too to leave things as they are)")
        return (f"plan #{rec.id} rejected; it is not proposed again unless something changes (the TUI's "
                "p, or heet-tui plan again, plans now)")

    async def _Replan(self, intent: Replan) -> str:
        ctl = self.ctl
        if ctl.applying is not None and not ctl.applying.done():
            raise ValueError("a plan is being applied; the next one is proposed when it is done")
        forgotten = len(ctl.rejected)
        ctl.rejected.clear()
        remember_rejections(ctl.store, ctl.rejected)
        ctl.pending_basis = None  # asked for: a plan made now replaces the pending one
        ctl.poke()
        return "planning again" + (f" ({forgotten} rejected plan(s) may be proposed again)" if forgotten else "")

    async def _EditJob(self, intent: EditJob) -> str:
        ctl = self.ctl
        if intent.plan_id != ctl.pending_plan_id and ctl.pending_plan_id is not None:
            # a newer plan came while the tweak dialog was open: what is fixed does not depend on
            # the plan, so it applies to that one (it was refused, and the dialog's input lost)
            intent = EditJob(ctl.pending_plan_id, intent.job_id, intent.constraints)
        if ctl.pending_plan_id is not None:
            self._pending(intent.plan_id)
        elif ctl.applying is not None and not ctl.applying.done():
            raise ValueError("a plan is being applied; edit the next one")
        # else nothing is pending (applied meanwhile, or a job the policy holds back on a quiet
        # cluster): the edit makes the plan proposed now; a held job could not be started by hand
        if ctl.store.job(intent.job_id) is None:
            raise ValueError(f"no job {intent.job_id!r}")
        refuse_too_big(ctl, intent.job_id, intent.constraints)
        plan = ctl.replan({intent.job_id: intent.constraints})  # raises ValueError when infeasible
        if plan is None:
            raise ValueError(f"job {intent.job_id} cannot be planned now")
        new_id = ctl.pending_plan_id = ctl.store.add_plan(plan)
        ctl.store.set_plan_status(new_id, "proposed", ctl.clock(),
                                  edits={intent.job_id: constraints_to_obj(intent.constraints)})
        self.edits.edit(intent.job_id, intent.constraints, new_id)
        fixed = intent.constraints.describe()
        ctl.store.add_event(ctl.clock(), "update", f"{intent.job_id}: edited on the Plan screen (plan #{new_id}): "
                            + (f"{fixed}; plans keep to it until it is dropped" if fixed else
                               "nothing fixed; plans place it freely"), intent.job_id)
        return f"plan #{new_id} re-evaluated with the edit to {intent.job_id}; approve it to apply"

    async def _DropEdit(self, intent: DropEdit) -> str:
        ctl = self.ctl
        had = self.edits.drop(intent.job_id)
        if not had.is_set:
            raise ValueError(f"{intent.job_id} has no edit to drop")
        said = f"{intent.job_id}: edit dropped ({had.describe()}); plans place it freely again"
        ctl.store.add_event(ctl.clock(), "update", said, intent.job_id)
        ctl.rejected.clear()  # a plan rejected while the edit held may be the right one now
        remember_rejections(ctl.store, ctl.rejected)
        ctl.poke()
        return said

    async def _SubmitJob(self, intent: SubmitJob) -> str:
        """One file, or every one a directory or glob names (all or none, as ``heet-tui submit``)."""
        try:
            paths = spec_paths(intent.spec_path)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        specs, origins, problems = load_job_specs(paths)
        if problems:
            raise ValueError("; ".join(problems) + ("; nothing submitted" if len(paths) > 1 else ""))
        now, files = self.ctl.clock(), [spec_file(path) for path in origins]
        try:
            jobs = self.ctl.store.add_jobs(specs, now, files)
        except CheckpointDirInUse as exc:
            raise ValueError(exc.located(origins[exc.index], specs[exc.index].name)
                             + ("; nothing submitted" if len(specs) > 1 else "")) from None
        hints: list[str] = []
        for path, file, spec, job in zip(origins, files, specs, jobs, strict=True):
            self.ctl.store.add_event(now, "submit", f"submitted {job.id} from {file}", job.id)
            for hint in submit_hints(spec, path, self.ctl.hosts):  # kept with the job: a toast goes by
                self.ctl.store.add_event(now, "warning", f"at submit: {hint}", job.id)
                hints += [hint] if hint not in hints else []
        return f"submitted {', '.join(j.id for j in jobs)}" + "".join(f"{WARNING_SEP}{h}" for h in hints)

    async def _UpdateJobs(self, intent: UpdateJobs) -> str:
        """As ``heet-tui update``; a running job's processes follow at the next round (job_update.py)."""
        try:
            paths = spec_paths(intent.spec_path)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        found, ended = planned_updates(self.ctl.store, *load_job_specs(paths), self.ctl.executor.hosts)
        return "; ".join([*(str(apply_update(self.ctl.store, rec, spec, path, self.ctl.clock()))
                            for rec, spec, path in found), *ended])

    async def _CancelJob(self, intent: CancelJob) -> str:
        rec = self.ctl.store.find_job(intent.job_id)
        if rec is not None and not rec.job.state.terminal and not rec.cancel_requested:
            # as heet-tui cancel records it (the job's events had no word of an x in the TUI)
            self.ctl.store.add_event(self.ctl.clock(), "cancel", f"cancel requested for {rec.job.id}", rec.job.id)
        return await self.cancel(intent.job_id)

    async def cancel(self, job_id: str) -> str:
        ctl = self.ctl
        rec = ctl.store.find_job(job_id)
        if rec is None:
            raise ValueError(f"no job {job_id!r}")
        if rec.job.state.terminal:
            return f"{rec.job.id} is already {rec.job.state.value}"
        ctl.store.request_cancel(rec.job.id)
        for run in list(ctl.executor.profiles.get(rec.job.id, [])):
            if run.stop_reason != "cancel":
                await ctl.executor.stop_run(run, "cancel", wait=False)
        run = ctl.executor.runs.get(rec.job.id)
        if run is not None and run.stop_reason == "cancel":
            return f"{rec.job.id} is being cancelled"
        if run is not None:
            await ctl.executor.stop_run(run, "cancel", wait=False)
            return f"cancelling {rec.job.id}: stopping its processes"
        last = ctl.store.last_allocation(rec.job.id) if rec.job.state is JobState.QUEUED else None
        unreached = left_out_of_reach(last[0].host_names if last else (), ctl.cluster.status())
        ctl.store.try_set_state(rec.job.id, JobState.CANCELLED, ctl.clock(), f"cancelled{unreached}")
        return f"cancelled {rec.job.id}{unreached}"

    async def _RetryJob(self, intent: RetryJob) -> str:
        ctl = self.ctl
        rec = ctl.store.find_job(intent.job_id)
        if rec is None:
            raise ValueError(f"no job {intent.job_id!r}")
        said = retry_job(ctl.store, rec, ctl.clock())
        ctl.executor.backoff_until.pop(rec.job.id, None)
        ctl.executor.log_tails.pop(rec.job.id, None)  # the failed run's: the details show the new run's
        ctl.poke()
        return said

    async def _DrainHost(self, intent: DrainHost) -> str:
        ctl = self.ctl
        if intent.host not in ctl.hosts.names():
            raise ValueError(f"no host {intent.host!r} in {ctl.hosts.path}")
        # d on the Cluster screen, or the palette's drain/undrain host: no one key to name
        drain_by_hand(ctl.store, intent.host, intent.drained, ctl.clock(), "in the TUI")
        return f"{intent.host} {'drained: its jobs move at the next plan, or stop where no other host can hold them' if intent.drained else 'back in service'}"

    async def _ConnectHost(self, intent: ConnectHost) -> str:
        try:  # a ready host is not dropped (its jobs' events would stop a moment): its GPUs are read again
            return await self.ctl.cluster.reconnect(intent.host)
        except ClusterError as exc:
            raise ValueError(str(exc)) from None

    async def _TrustHostKey(self, intent: TrustHostKey) -> str:
        try:
            recorded = await self.ctl.cluster.trust(intent.host, intent.fingerprint)
        except ClusterError as exc:
            raise ValueError(str(exc)) from None
        return f"trusted the key of {intent.host} (saved in {recorded.path}){recorded.stale}; reconnecting"

    async def _SetPolicy(self, intent: SetPolicy) -> str:
        ctl = self.ctl
        ctl.policy = planning.make_named_policy(intent.name)
        ctl.policy_name = intent.name
        ctl.store.set_setting("policy", intent.name)
        return f"policy set to {intent.name}"

    async def _SetAutoApprove(self, intent: SetAutoApprove) -> str:
        self.ctl.auto_approve = intent.enabled
        self.ctl.store.set_setting("auto_approve", json.dumps(intent.enabled))
        return "auto-approve on" if intent.enabled else "auto-approve off: plans wait for approval"
