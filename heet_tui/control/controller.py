"""The controller: cluster events in, plans out, and the Backend the TUI drives.

Two asyncio tasks: one consumes cluster events as they come (progress, exits, hosts coming
and going) so that a plan being applied sees exits at once; the other runs rounds every
``interval_s``: pick up jobs and cancels written to the store by other processes, profile
new jobs, ask the policy for a plan, approve it (auto mode) or wait for the user, publish a
snapshot. Every decision is recorded in the store first, so a restarted controller carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path

from heet_tui.cluster import Cluster, ClusterOptions, HostChanged, JobExited, JobProgress, JobsReported
from heet_tui.cluster.aio import cancel_and_wait
from heet_tui.cluster.events import JobProgressError
from heet_tui.config.hosts_file import HostsFile
from heet_tui.control import planning, remembered
from heet_tui.control.attach import AttachServer
from heet_tui.control.drains import drained_hosts
from heet_tui.control.edit_room import refuse_too_big
from heet_tui.control.execution import ExecOptions, Executor
from heet_tui.control.host_health import drain_broken_hosts, keep_off_crash_hosts
from heet_tui.control.host_loss import (
    HostLossGrace,
    HostStateLog,
    hold_unlisted_hosts,
    on_host_changed,
    trust_hosts_option,
    try_hosts_near_their_deadline,
    why_lost,
)
from heet_tui.control.hosts_reload import HostsReloader
from heet_tui.control.intents import IntentHandler
from heet_tui.control.job_log import job_log
from heet_tui.control.job_update import follow_requests
from heet_tui.control.kept_hosts import with_kept_hosts
from heet_tui.control.log_file import attach_log_file, detach_log_file
from heet_tui.control.notices import Notices
from heet_tui.control.plan_apply import apply_plan
from heet_tui.control.plan_inputs import job_inputs
from heet_tui.control.profiling_rounds import profile_idle_types, profile_new_jobs
from heet_tui.control.progress_reports import note_bad_progress
from heet_tui.control.proposals import RETRY_FAILED_PLAN_S, propose
from heet_tui.control.recovery import rebuild_runs, reconcile_host
from heet_tui.control.remembered import remembered_auto_approve, remembered_options, remembered_policy
from heet_tui.control.round_errors import RoundErrors
from heet_tui.control.sessions import succeed
from heet_tui.control.snapshot_build import build_snapshot
from heet_tui.control.snapshots import ControllerLock, SnapshotHub
from heet_tui.control.store import Store, StoreWriteError
from heet_tui.control.store_health import StoreHealth
from heet_tui.control.store_integrity import refuse_damaged
from heet_tui.control.throughput import ThroughputBook, profiling_model
from heet_tui.control.unmeasured import hide_nominal
from heet_tui.control.waiting import PlanMade, explain_waiting
from heet_tui.core.host import HostState
from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import Plan, PredictedEffect
from heet_tui.core.sched_input import ClusterView, Constraints
from heet_tui.core.snapshot import Snapshot
from heet_tui.scheduling.evaluate import evaluate

log = logging.getLogger(__name__)
PAUSE_SAID_S = 30.0  # a wait between rounds this much longer than asked is the controller's own pause
STOP_TIMEOUT_S = 30.0  # a plan step may be waiting out a job's stop grace period


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    interval_s: float = 2.0
    policy: str = "heet"
    auto_approve: bool | None = None  # None: what the store remembers (default manual)
    gain_threshold: float = 0.05
    profile: bool = True
    profile_types: int = 2  # GPU types each new job is profiled on
    settle_timeout_s: float = 30.0
    host_loss_grace_s: float = 60.0  # a host out for longer loses its runs (control/host_loss.py)
    execution: ExecOptions = ExecOptions()
    cluster: ClusterOptions | None = None
    # Watch only (--read-only, no controller running): reports; launches, fences, applies nothing
    read_only: bool = False


class Controller:
    """Implements ``heet_tui.core.backend.Backend``."""

    def __init__(self, hosts: HostsFile, store: Store, options: ControllerOptions | None = None,
                 cluster: Cluster | None = None, clock: Callable[[], float] = time.time) -> None:
        hosts, kept = with_kept_hosts(hosts, store)  # gone from the file, kept for their jobs by the last one
        self.hosts, self.store, self.opt = hosts, store, options or ControllerOptions()
        self.opt = remembered_options(store, self.opt)
        # The agents record which store they serve: another controller's cannot take them over.
        trust = trust_hosts_option(hosts.path)
        self.cluster = cluster or Cluster(hosts, replace(self.opt.cluster or ClusterOptions(), owner=store.store_id,
                                                         session=uuid.uuid4().hex[:12], trust_hosts_option=trust))
        self.clock = clock
        self.book = ThroughputBook(predictor=profiling_model(), guess_unrelated=not self.opt.profile)
        self.hub = SnapshotHub()
        self.executor = Executor(self.cluster, hosts, store, self.book, self.opt.execution, clock, self.poke)
        self.intents = IntentHandler(self)
        self.hosts_reloader = HostsReloader(hosts.path, kept)
        self.policy_name = remembered_policy(store, self.opt.policy)
        self.policy = planning.make_named_policy(self.policy_name)
        if self.opt.auto_approve is not None and not self.opt.read_only:
            store.set_setting("auto_approve", json.dumps(self.opt.auto_approve))
        self.auto_approve = not self.opt.read_only and remembered_auto_approve(store)
        self.executor.read_only = self.opt.read_only
        self.pending_plan_id: int | None = None
        self.plan_made: PlanMade | None = None  # the latest plan, proposed or not (waiting.py)
        self.held_why: str | None = None  # why auto-approve leaves the latest plan to the user
        self.rejected: set[str] = remembered.remembered_rejections(store)
        self.pending_basis: str | None = None  # what the pending plan was made from (proposals.py)
        self._host_seen: dict[str, HostState] = {}  # each host's state in its last event (_wakes)
        self.failed_plans: dict[str, tuple[float, str]] = {}  # signature -> when applying it last failed, why
        self.applying: asyncio.Task | None = None
        self._applying_id: int | None = None
        self.notices = Notices()
        self.store_health = StoreHealth(store, self.clock, self.notices)
        self.round_errors = RoundErrors(store.dir, self.notices)
        self._lock = ControllerLock(store.dir)
        self.attach_server = AttachServer(self, store.dir)
        self._tasks: list[asyncio.Task] = []
        self._log_handler: logging.Handler | None = None
        self._stopping = False
        self._wake = asyncio.Event()
        self._started_at = 0.0
        self.was_ready: set[str] = set()  # hosts that were ready: one that drops out is lost
        self.host_states = HostStateLog(trust_option=trust)
        self.host_grace = HostLossGrace(self.opt.host_loss_grace_s)

    # -- life cycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self._lock.acquire()
        refuse_damaged(self.store)  # before any host is touched
        self._log_handler = attach_log_file(self.store.dir)
        now = self._started_at = self.clock()
        if self.hosts.path is not None:  # a TUI attaching later shows this file on its Hosts screen
            self.store.set_setting("hosts_path", str(Path(self.hosts.path).resolve()))
        for rec in self.store.jobs():
            self.book.register(rec.job.id, rec.job.spec.model, rec.job.spec.batch_size, rec.job.spec.min_gpus)
        self.book.load(self.store.observations())
        self.notices += rebuild_runs(self.store, self.executor, now) + hold_unlisted_hosts(self, now)
        for rec in self.store.plans_with_status("proposed"):
            self.store.set_plan_status(rec.id, "superseded", now)
        events = self.cluster.events()
        self._tasks.append(asyncio.get_running_loop().create_task(self._consume(events)))
        try:
            await self.attach_server.start()
        except OSError as exc:  # the controller runs on; only attaching a second TUI is lost
            self.notices.append(f"a TUI cannot attach to this controller: {exc}")
        if self.cluster.options.session:  # one this controller made (a test may hand it another)
            self.cluster.options = replace(self.cluster.options,
                                           previous_session=succeed(self.store, self.cluster.options.session))
        await self.cluster.start()
        self._tasks.append(asyncio.get_running_loop().create_task(self._rounds()))
        self.store.add_event(now, "controller", f"controller started: {len(self.hosts.hosts)} host(s)")

    async def stop(self, why: str = "") -> None:
        # The flag, not only the cancel, ends the loops: on Python 3.11 a cancel that races a
        # completing ``wait_for`` is swallowed, and a loop that never sees it would never end.
        log.info("controller stopping%s", f" ({why})" if why else "")  # the log said only when it started
        self._stopping = True
        self._wake.set()
        await self.attach_server.close()
        await self._stop_profiling_runs()
        await cancel_and_wait([*self._tasks, self.applying], STOP_TIMEOUT_S, "controller task")
        await self.executor.close()
        await self.cluster.stop()
        await self.hub.close()
        if self._log_handler is not None:
            detach_log_file(self._log_handler)
        self._lock.release()

    async def _stop_profiling_runs(self) -> None:
        """A profiling run measures for this controller alone and has no end of its own: left
        behind by a quit, it trained its job's whole target, unwatched, on the GPUs it held."""
        runs = [r for runs in self.executor.profiles.values() for r in runs if r.stop_reason is None]
        for run in runs:
            with contextlib.suppress(Exception):  # a host out: its agent's fence ends the run later
                await asyncio.wait_for(self.executor.stop_run(run, "the controller stopped", wait=False), 5.0)

    def poke(self) -> None:
        self._wake.set()

    # -- Backend ----------------------------------------------------------------------------
    def snapshots(self) -> AsyncIterator[Snapshot]:
        return self.hub.stream()

    async def post(self, intent: Intent) -> str:
        result = await self.intents.handle(intent)
        self.poke()  # what was asked shows in a plan now, not at the next round
        await self.publish()
        return result

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        return await job_log(self, job_id, lines, rank, generation)

    async def preview(self, edit: EditJob) -> PredictedEffect:
        refuse_too_big(self, edit.job_id, edit.constraints)
        plan = self.replan({edit.job_id: edit.constraints})
        if plan is None:
            raise ValueError(f"job {edit.job_id} cannot be planned now")
        return plan.effect

    # -- the two loops ----------------------------------------------------------------------
    async def _consume(self, events) -> None:
        async for event in events:
            if self._stopping:
                return
            try:
                if self.store_health.error is None:
                    await self._on_event(event)
            except StoreWriteError as exc:
                self.store_health.failed(exc)
            except Exception:  # one bad event must not stop the controller
                log.exception("handling %r", event)
            if self._wakes(event):
                self.poke()

    def _wakes(self, event) -> bool:
        """Whether ``event`` is worth a round now, not at the next one (``interval_s``): GPUs freed,
        a host in or out. Progress lines and heartbeats are not: on 60 hosts with 180 jobs they
        came dozens a second, and rounds ran back to back, planning and publishing every 0.4 s."""
        if isinstance(event, JobProgress | JobProgressError):
            return False
        if isinstance(event, HostChanged):
            before, self._host_seen[event.host] = self._host_seen.get(event.host), event.status.state
            return before is not event.status.state
        return True

    async def _on_event(self, event) -> None:
        if isinstance(event, JobProgress):
            self.executor.on_progress(event.host, event.job_id, event.generation, event.progress)
        elif isinstance(event, JobProgressError):
            note_bad_progress(self.executor, event, self.clock())
        elif isinstance(event, JobExited):
            if not self.executor.on_exit(event.job):
                log.debug("exit of an unknown process %s on %s", event.job.job_id, event.host)
        elif isinstance(event, JobsReported):
            self.notices += await reconcile_host(self.executor, self.store, self.cluster, event.host, event.jobs,
                                                 self.clock())
        elif isinstance(event, HostChanged):
            on_host_changed(self, event.host, event.status)

    async def _rounds(self) -> None:
        paused_s = 0.0
        while not self._stopping:
            try:
                if paused_s > PAUSE_SAID_S:  # in the log and events: a postmortem reads it beside the hosts'
                    self.store.add_event(self.clock(), "controller", f"the controller did not run for {paused_s:.0f} s"
                                         " (stopped with kill -STOP, its machine suspended, or starved of CPU)")
                paused_s = 0.0
                if self.store_health.writable():
                    await self.store_health.resync(self.executor, self.cluster, self._on_event)
                    await self.round()
                    self.round_errors.succeeded()
                else:
                    await self.publish()  # the notice; jobs as last known
            except StoreWriteError as exc:
                self.store_health.failed(exc)
            except Exception as exc:
                self.round_errors.failed(exc)
                with contextlib.suppress(Exception):
                    await self.publish()  # the notice, with the figures as last known
            self._wake.clear()
            waited_from = time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.opt.interval_s):
                    await self._wake.wait()
            paused_s = time.monotonic() - waited_from - self.opt.interval_s
            if not self._stopping:
                await asyncio.sleep(min(0.2, self.opt.interval_s))  # coalesce bursts of events

    async def round(self) -> None:
        now = self.clock()
        if self.hosts_reloader.due():
            self.notices += await self.hosts_reloader.reload(self)
        await try_hosts_near_their_deadline(self, now)
        for host, why in self.host_grace.expired(now):
            self.executor.lose_host(host, why_lost(why, next((s for s in self.cluster.status() if s.name == host),
                                                             None)))
        if now - self._started_at > self.opt.settle_timeout_s:
            for status in self.cluster.status():
                if status.state is HostState.CONNECTING and status.name not in self.host_grace.holding():
                    self.executor.lose_host(status.name, "still connecting")
        active = self.store.jobs(include_terminal=False)
        for rec in active:  # jobs other processes submitted
            self.book.register(rec.job.id, rec.job.spec.model, rec.job.spec.batch_size, rec.job.spec.min_gpus)
        if not self.opt.read_only:
            await follow_requests(self, active)  # by heet-tui cancel and update
        settling = any(s.state is HostState.CONNECTING for s in self.cluster.status())
        if settling and now - self._started_at <= self.opt.settle_timeout_s:
            await self.publish()  # plans wait until every host has connected or given up
            return
        if self.applying is None or self.applying.done():
            self.applying = None
            if not self.opt.read_only:
                await self._resume_applying()
        if not self.opt.read_only:
            drain_broken_hosts(self)
        if self.applying is None:  # a read-only executor starts and stops nothing (execution.py)
            await self.executor.stop_silent_runs()
            await profile_new_jobs(self)
            await profile_idle_types(self)
            self._propose()
        explain_waiting(self, now)
        await self.publish()

    def cluster_view(self, for_plans: bool = True, planned: Collection[str] | None = None) -> ClusterView:
        """The ready, usable GPUs as the policies see them; for plans, less those profiling runs
        and other state stores' processes hold (a plan giving them out would fail when applied)."""
        usable = {h.name: h.gpus for h in self.hosts.hosts}
        reserved = self.executor.reserved_gpus(planned) if for_plans else None
        return planning.cluster_view(self.cluster.status(), usable, self.drained(), reserved)

    async def _resume_applying(self) -> None:
        for rec in self.store.plans_with_status("approved", "applying"):
            self.start_apply(rec.id)
            return

    def start_apply(self, plan_id: int) -> None:
        self.applying = asyncio.get_running_loop().create_task(self._apply(plan_id))
        self._applying_id = plan_id

    def applying_plan_id(self) -> int | None:
        return self._applying_id if self.applying is not None and not self.applying.done() else None

    async def _apply(self, plan_id: int) -> None:
        try:
            self.notices.append(await apply_plan(self.executor, self.store, plan_id, self.clock))
            if failed := [step for step in self.store.steps(plan_id) if step.status == "failed"]:
                now = self.clock()  # only recent failures matter; the job's row says why meanwhile
                self.failed_plans = {sig: f for sig, f in self.failed_plans.items() if now - f[0] < RETRY_FAILED_PLAN_S}
                self.failed_plans[planning.signature(self.store.plan(plan_id).plan)] = (
                    now, f"{failed[0].change.job_id}: {failed[0].message}")
        except Exception as exc:
            log.exception("applying plan %d", plan_id)
            self.store.set_plan_status(plan_id, "failed", self.clock())
            self.notices.append(f"plan #{plan_id} failed: {exc}")
        finally:
            self.pending_plan_id = None
            self.poke()

    # -- planning -----------------------------------------------------------------------------
    def drained(self) -> set[str]:  # by the user, or removed from the hosts file while running jobs
        return drained_hosts(self.store) | self.hosts_reloader.leaving

    def job_inputs(self, overrides: dict[str, Constraints] | None = None) -> list[planning.JobInput]:
        return job_inputs(self, overrides)

    def replan(self, overrides: dict[str, Constraints] | None = None) -> Plan | None:
        return self.replan_from(self.job_inputs(overrides))

    def replan_from(self, inputs: list[planning.JobInput], cluster: ClusterView | None = None) -> Plan | None:
        if not inputs:
            return None
        cluster = cluster or self.cluster_view(planned={j.id for j in inputs})
        inputs = keep_off_crash_hosts(inputs, cluster, self.executor.health, self.book.classes, self.cluster.status())
        views = planning.job_views(inputs, self.book, self.clock(), cluster)
        plan = planning.run_policy(self.policy, self.policy_name, cluster, views, self.book, self.clock())
        problems = planning.check_constraints(plan, views)
        if problems:
            raise ValueError("; ".join(problems))
        return self._as_shown(plan, plan.effect, inputs)

    def reevaluate(self, plan: Plan, inputs: list[planning.JobInput], cluster: ClusterView) -> Plan:
        """``plan``'s same moves with their figures predicted as of now (proposals.py)."""
        views = planning.job_views(inputs, self.book, self.clock(), cluster)
        effect = planning.with_spreads(replace(plan, effect=evaluate(plan, cluster, views)), self.book)
        return self._as_shown(plan, effect, inputs)

    def _as_shown(self, plan: Plan, effect: PredictedEffect, inputs: list[planning.JobInput]) -> Plan:
        """The figures a plan is shown with: unmeasured jobs' nominal ones hidden, dated now."""
        effect = hide_nominal(effect, {j.id for j in inputs if not j.measured})
        return replace(plan, effect=replace(effect, at=self.clock()))

    def _propose(self) -> None:
        propose(self)

    @property
    def not_auto_approved(self) -> str:
        """Why auto-approve, on, leaves the pending plan to the user; "" when it is off or applies it."""
        return (self.held_why or "") if self.auto_approve and self.pending_plan_id is not None else ""

    async def publish(self) -> None:
        await self.hub.publish(build_snapshot(self))

    def all_done(self) -> bool:
        return (not self.store.jobs(include_terminal=False) and not self.executor.all_runs()
                and (self.applying is None or self.applying.done()))
