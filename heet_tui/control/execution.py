"""Launching, stopping and judging job processes through the cluster layer.

The store is written *before* anything is sent to a host (a fresh generation and the
allocation), so a controller killed half-way through a launch finds, on restart, exactly which
generation may be running and fences every other one. Exits arrive as cluster events; when
the last rank of a run has ended the run is judged once (done, stopped, interrupted, crashed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from heet_agent.errors import STILL_STOPPING

from heet_tui.cluster import AgentRequestError, ClusterError, HostNotReady, RemoteJob
from heet_tui.cluster.aio import cancel_and_wait, spawn
from heet_tui.config.hosts_file import HostsFile
from heet_tui.control import progress_reports as reports
from heet_tui.control.checkpoint_hosts import CheckpointHosts, CopyWaiting
from heet_tui.control.crash_backoff import after_crash
from heet_tui.control.crashed_sizes import load_crashed_sizes
from heet_tui.control.host_health import stored_health
from heet_tui.control.launch import LaunchSpec, choose_master_port, plan_launch, plan_profile_launch
from heet_tui.control.newer_copies import highest
from heet_tui.control.profiling_rounds import profiling_message
from heet_tui.control.restart_costs import start_seconds
from heet_tui.control.run_end import finish_run
from heet_tui.control.runtime import (
    LAUNCH_REFUSED,
    NOT_LAUNCHED,
    RankProc,
    Run,
    gpus_held,
    outside_gpus,
    stale_gpus,
    union_gpus,
)
from heet_tui.control.seen_exits import note_ended
from heet_tui.control.stalls import DEFAULT_STALL_S, quiet_message, stalled
from heet_tui.control.stop_grace import LOST_PEER_GRACE_S, grace_s, warn_slow_stop
from heet_tui.control.store import Store
from heet_tui.control.throughput import ThroughputBook
from heet_tui.control.unmeasured import TIMED_OUT as UNMEASURED_TIMEOUT
from heet_tui.control.unmeasured import overdue_profiling, overdue_why
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import DEFAULT_STOP_GRACE_S, JobState
from heet_tui.core.metrics import training_metrics

log = logging.getLogger(__name__)
# past its timeout, a profiling run stops by itself too: its controller may be gone (launch.py)
PROFILE_BOUND_MARGIN_S = 60.0
OBSERVE_EVERY_S = 10.0  # a running job's throughput is recorded this often, not on every progress line


@dataclass(frozen=True, slots=True)
class ExecOptions:
    stop_grace_s: float = DEFAULT_STOP_GRACE_S  # for jobs whose spec sets no stop_grace
    max_retries: int = 2
    retry_backoff_s: float = 2.0
    profile_reports: int = 2
    profile_timeout_s: float = 600.0  # a profiling run without its reports by then is stopped
    stall_timeout_s: float = DEFAULT_STALL_S  # a job's default silence before it counts as hung


class StepFailed(RuntimeError):
    """A plan step that cannot be carried out now (host gone, GPUs taken); the job is requeued."""


class Executor:
    def __init__(self, cluster, hosts: HostsFile, store: Store, book: ThroughputBook, options: ExecOptions,
                 clock: Callable[[], float] = time.time, notify: Callable[[], None] = lambda: None) -> None:
        self.cluster, self.hosts, self.store, self.book, self.opt = cluster, hosts, store, book, options
        self.clock, self.notify = clock, notify
        self.runs: dict[str, Run] = {}  # job id -> its training run (at most one)
        self.profiles: dict[str, list[Run]] = {}  # job id -> its profiling runs
        self.last_profiled: dict[str, Run] = {}  # job id -> its latest profiling run that ended (its log)
        self.backoff_until: dict[str, float] = {}
        self.side_profile_failed: set[tuple[str, str]] = set()  # (job, type) side runs that measured nothing
        self.silent_profiles: set[str] = set()  # jobs whose current profiling round had a run measure nothing
        self.crashed_rounds: dict[str, tuple[Run, str]] = {}  # job -> its profiling round's first crash
        self.crashed_sizes = load_crashed_sizes(store)  # job -> (type, GPUs) plans leave out
        self.health = stored_health(store)  # runs that died at once, by host (host_health.py)
        self.warned: set[tuple[str, str]] = set()  # (job, warning) said once per controller
        self.last_steps: dict[str, int] = {}  # each job's latest reported step, whichever launch reported it
        self.log_tails: dict[str, tuple[str, ...]] = {}
        self.checkpoints = CheckpointHosts(store, clock)
        self.newer_copies: set[tuple[str, str, int]] = set()  # (host, agent id, generation): recovery.py
        self.fenced: set[tuple[str, str, int]] = set()  # this store's stale runs fenced, stopping: recovery.py
        self.read_only = False  # a watch-only controller: launch, profile and stop nothing
        self._tasks: set[asyncio.Task] = set()

    # -- bookkeeping ------------------------------------------------------------------------
    def all_runs(self) -> list[Run]:
        return [*self.runs.values(), *(r for rs in self.profiles.values() for r in rs)]

    def busy_gpus(self, except_job: str | None = None) -> dict[str, set[int]]:
        """GPUs something holds: runs, processes outside this store, and this store's fenced
        runs still stopping (``except_job``'s own aside: runtime.stale_gpus)."""
        runs = self.all_runs()
        return union_gpus(gpus_held(runs), outside_gpus(self.cluster, self.store.store_id, self.newer_copies),
                          stale_gpus(self.cluster, self.fenced, except_job))

    def in_profiling_round(self, job_id: str) -> bool:
        """Profiled as a new job (not planned meanwhile); a side run leaves the job to the plans."""
        return any(not r.side for r in self.profiles.get(job_id, ()))

    def reserved_gpus(self, planned: Collection[str] | None = None) -> dict[str, set[int]]:
        """GPUs in use yet in no allocation a plan knows of: profiling runs', processes this store
        did not start, and the runs of jobs left out of the ``planned`` (on a host that launches
        nothing now: a plan gave the GPU of its running job to another, and failed every minute)."""
        left_out = gpus_held(r for job_id, r in self.runs.items() if planned is not None and job_id not in planned)
        return union_gpus(gpus_held(r for rs in self.profiles.values() for r in rs),
                          outside_gpus(self.cluster, self.store.store_id, self.newer_copies), left_out,
                          stale_gpus(self.cluster, self.fenced))

    def find(self, host: str, agent_id: str, generation: int) -> tuple[Run, RankProc] | None:
        for run in self.all_runs():
            if run.generation == generation:
                rank = run.rank_for(host, agent_id)
                if rank is not None:
                    return run, rank
        return None

    def _spawn(self, coro) -> None:
        spawn(self._tasks, coro)

    # -- launching --------------------------------------------------------------------------
    async def launch(self, job_id: str, alloc: Allocation) -> Run:
        if self.read_only:
            raise StepFailed("the controller is read-only")
        rec = self.store.job(job_id)
        if rec is None:
            raise StepFailed(f"job {job_id} no longer exists")
        if rec.cancel_requested or rec.job.state.terminal:  # a cancelled job trained on, "cancelled", for good
            raise StepFailed(f"job {job_id} is {'cancelled' if rec.cancel_requested else rec.job.state.value}")
        entries = {h.name: h for h in self.hosts.hosts}
        busy = self.busy_gpus(except_job=job_id)
        for host, gpus in alloc.hosts:
            if host not in entries:
                raise StepFailed(f"host {host} is not in the hosts file")
            if self.cluster.host_status(host).state.value != "ready":
                raise StepFailed(f"host {host} is not ready")
            if busy.get(host, set()) & set(gpus):
                raise StepFailed(f"GPUs {sorted(busy[host] & set(gpus))} of {host} are still in use")
        began = self.clock()  # a checkpoint copy is part of the job's start-up pause (restart_costs.py)
        try:
            await self.checkpoints.bring(job_id, rec.job.spec, entries, entries[alloc.hosts[0][0]], rec.checkpoint,
                                         getattr(self.hosts, "ssh_config", None), getattr(self.cluster, "options", None),
                                         rec.job.steps_done, getattr(self.cluster, "open_sftp", None))
        except CopyWaiting as exc:
            raise StepFailed(str(exc)) from None
        generation = self.store.next_generation(job_id, past=highest(self.store, job_id))  # newer_copies.py
        port = choose_master_port(job_id, generation, entries[alloc.hosts[0][0]], self.store.store_id)
        specs = plan_launch(job_id, rec.job.spec, alloc, generation, entries, port, owner=self.store.store_id,
                            stop_grace_s=grace_s(rec.job.spec, self.opt.stop_grace_s),
                            reported_checkpoint=rec.checkpoint, address_of=getattr(self.cluster, "reachable_address", None))
        now = self.clock()
        self.store.record_allocation(alloc, generation, now, rec.job.spec)
        run = Run(job_id, alloc, generation, {s.rank: RankProc(s.host, s.agent_id, s.rank, s.gpus, "launching")
                                              for s in specs}, began, start_samples=rec.job.samples_done,
                  spec=rec.job.spec)
        self.runs[job_id] = run
        await self._send_launches(run, specs)
        if not run.any_exited:
            self.store.try_set_state(job_id, JobState.RUNNING, self.clock(), f"running on {alloc.describe()}")
        self.store.add_event(self.clock(), "launch", f"{job_id} generation {generation}: {alloc.describe()}", job_id)
        self._after_exit(run)
        return run

    async def _launch_when_old_exits(self, s: LaunchSpec, generation: int, grace: float) -> None:
        """Launch; while an older generation there is still exiting (just fenced or stopped),
        wait for it: it is on its way out, and refusing the launch would count as a crash."""
        deadline = self.clock() + grace + 15.0
        while True:
            try:
                await self.cluster.launch(s.host, s.agent_id, generation, list(s.argv), env=dict(s.env),
                                          workdir=s.workdir, gpus=s.gpus, visible=s.visible)
                return
            except AgentRequestError as exc:
                if STILL_STOPPING not in str(exc) or self.clock() > deadline:
                    raise
            await asyncio.sleep(0.5)

    async def _send_launches(self, run: Run, specs: list[LaunchSpec]) -> None:
        for s in specs:
            rank = run.ranks[s.rank]
            try:
                await self._launch_when_old_exits(s, run.generation, grace_s(run.spec, self.opt.stop_grace_s))
                if rank.state == "launching":
                    rank.state = "running"
            except HostNotReady as exc:
                self._rank_exited(rank, None, None, f"lost: {exc}")
            except (AgentRequestError, ClusterError) as exc:  # refused: a later "it finished there" is false
                self._rank_exited(rank, 127, None, f"{LAUNCH_REFUSED}: {exc}")
                if s.rank == 0:
                    note_ended(self.store, run.job_id, run.generation)
            if rank.exited:  # no point starting more ranks of a run that cannot form
                for rest in specs[s.rank + 1:]:
                    self._rank_exited(run.ranks[rest.rank], None, None, NOT_LAUNCHED)
                self._spawn(self.stop_run(run, None))
                return

    async def start_profiling(self, job_id: str, candidates: list[tuple[str, int]], side: bool = False) -> int:
        """One single-GPU run per (host, gpu) candidate (one per GPU type, chosen by the controller).

        A ``side`` run measures a job that already has measurements on another type: the job
        keeps its state (it may be running), and a run that measures nothing is not retried.
        """
        rec = self.store.job(job_id)
        if rec is None or not candidates or self.read_only:
            return 0
        entries = {h.name: h for h in self.hosts.hosts}
        if not side:
            self.store.try_set_state(job_id, JobState.PROFILING, self.clock(), "profiling")
        runs = self.profiles.setdefault(job_id, [])
        types = []
        for host, gpu in candidates:
            generation = self.store.next_generation(job_id, past=highest(self.store, job_id))  # newer_copies.py
            spec = plan_profile_launch(job_id, rec.job.spec, entries[host], gpu, generation, owner=self.store.store_id,
                                       stop_grace_s=grace_s(rec.job.spec, self.opt.stop_grace_s),
                                       max_s=self.opt.profile_timeout_s + PROFILE_BOUND_MARGIN_S)
            gpu_type = self.cluster.host_status(host).gpu_type
            types.append(gpu_type)
            run = Run(job_id, Allocation.of(job_id, gpu_type, {host: [gpu]}), generation,
                      {0: RankProc(host, spec.agent_id, 0, (gpu,), "launching")}, self.clock(), profiling=True,
                      side=side, start_samples=0.0, spec=rec.job.spec)  # its stop grace and stall timeout
            runs.append(run)
            await self._send_launches(run, [spec])
        what = f"profiling on {len(candidates)} GPU type(s)" if not side else \
            f"profiling on {', '.join(types)}, idle GPUs it had no estimate for"
        self.store.add_event(self.clock(), "profile", f"{job_id}: {what}", job_id)
        if not side:  # "profiling" alone left the user to guess where, and for how long
            self.store.try_set_state(job_id, JobState.PROFILING, self.clock(), profiling_message(runs))
        for run in list(runs):
            self._after_exit(run)
        return len(candidates)

    async def stop_silent_runs(self) -> None:
        """Stop profiling runs that measured nothing in ``profile_timeout_s``, and hung jobs (stalls.py)."""
        if self.read_only:
            return  # it stops nothing: judging the same runs every round would only fill the log
        now = self.clock()
        for run in overdue_profiling(self.profiles, now, self.opt.profile_timeout_s, self.opt.stall_timeout_s):
            measured = " (what it reported counts)" if run.rates else ""
            self.store.add_event(now, "profile", f"{run.job_id}: profiling run on {run.alloc.describe()} stopped: "
                                 f"{overdue_why(run, now, self.opt.stall_timeout_s)}{measured}", run.job_id)
            await self.stop_run(run, UNMEASURED_TIMEOUT, wait=False)
        for run in self.runs.values():
            if not run.quiet_said and run.spec is not None and (
                    said := quiet_message(run, run.spec, now, self.opt.stall_timeout_s)) is not None:
                run.quiet_said = True
                self._running_message(run.job_id, now, said)
        for run, why in stalled(list(self.runs.values()), lambda job_id: self.runs[job_id].spec, now,
                                self.opt.stall_timeout_s):
            log.info("%s generation %d: %s", run.job_id, run.generation, why)  # the crash event says it
            await self.stop_run(run, why, wait=False)

    def _running_message(self, job_id: str, now: float, message: str) -> None:
        rec = self.store.job(job_id)
        if rec is not None and rec.job.state is JobState.RUNNING:  # a resize or a stop says its own
            self.store.set_state(job_id, JobState.RUNNING, now, message)

    # -- stopping ---------------------------------------------------------------------------
    async def stop_run(self, run: Run, reason: str | None, wait: bool = True, grace: float | None = None) -> None:
        """SIGTERM every live rank (the script checkpoints and exits), then wait for the run to end.

        ``reason`` None means a cleanup after a failed rank: the run keeps its own verdict.
        ``grace``: seconds to SIGKILL, where not the job's own stop grace.
        """
        if self.read_only:
            return
        if reason is not None and run.stop_reason is None:
            run.stop_reason, run.stop_sent_at = reason, self.clock()
        elif reason == "cancel" and run.stop_reason is not None:
            run.stop_reason = reason  # cancelled while stopping for a move: ended "resize", it was launched again
        grace = grace_s(run.spec, self.opt.stop_grace_s) if grace is None else grace
        for rank in [r for r in run.ranks.values() if not r.exited]:
            try:
                await self.cluster.stop_job(rank.host, rank.agent_id, generation=run.generation, grace_s=grace,
                                            wait=False)
            except HostNotReady as exc:
                self._rank_exited(rank, None, None, f"lost: {exc}")
            except ClusterError as exc:
                if "no job" in str(exc):
                    self._rank_exited(rank, None, None, "lost: the agent has no such job")
                else:
                    log.warning("stop %s on %s: %s", rank.agent_id, rank.host, exc)
        self._after_exit(run)
        if wait and not run.ended.is_set():
            try:
                await asyncio.wait_for(run.ended.wait(), grace + 15.0)
            except TimeoutError:
                for rank in [r for r in run.ranks.values() if not r.exited]:
                    self._rank_exited(rank, None, None, "lost: no exit reported after stop")
                self._after_exit(run)

    def unconfirm(self, host: str) -> bool:
        """The host dropped out: its live ranks wait for its next report to say they still run
        (``recovery.reconcile_host``). True when it has any."""
        ranks = [r for run in self.all_runs() for r in run.on_host(host) if not r.exited]
        for rank in ranks:
            rank.state = "unknown"
        return bool(ranks)

    def lose_host(self, host: str, why: str) -> None:
        """A host went away: its ranks count as exited; the rest of each run is stopped."""
        self.checkpoints.given_up.add(host)
        for run in self.all_runs():
            ranks = [r for r in run.on_host(host) if not r.exited]
            if not ranks:
                continue
            for r in ranks:
                self._rank_exited(r, None, None, f"lost: {why}")
            if run.stop_reason is None:
                run.stop_reason = f"host {host} lost ({why})"
                self.store.add_event(self.clock(), "host-lost", f"{run.job_id}: host {host} lost: {why}",
                                     run.job_id, host)
            if not run.all_exited:
                # the ranks left wait in a collective on the lost ones, where no SIGTERM reaches the
                # script: they held their GPUs for the job's whole stop grace, then were killed unsaid
                self._spawn(self.stop_run(run, None, grace=LOST_PEER_GRACE_S))
            self._after_exit(run)

    # -- events -----------------------------------------------------------------------------
    def on_exit(self, job: RemoteJob) -> bool:
        found = self.find(job.host, job.job_id, job.generation)
        if found is None:
            return False
        run, rank = found
        if rank.rank == 0:  # its host's later word about it is not taken (seen_exits.py)
            note_ended(self.store, run.job_id, run.generation)
        reports.record_unseen_progress(self.store, run, rank, job.progress)
        reports.remember_exit_step(self.last_steps, run, rank, job.progress)
        self._rank_exited(rank, job.exit_code, job.signal, job.reason)
        rank.ended_at = None if job.ended_ago_s is None else self.clock() - job.ended_ago_s
        reports.done_beside_out_of_reach(self, run, rank)
        if not run.all_exited and run.stop_reason is None and rank.exit_code != 0:
            self._spawn(self.stop_run(run, None))  # peers of a failed rank would hang in a collective
        self._after_exit(run)
        return True

    def on_progress(self, host: str, agent_id: str, generation: int, progress: dict) -> bool:
        found = self.find(host, agent_id, generation)
        if found is None:
            return False
        run, rank = found
        now = self.clock()
        if rank.rank != 0:
            reports.note_other_rank_progress(self.store, run, rank.rank, now)
            return True
        held = now - run.progress_at if run.progress_at is not None else 0.0
        run.progress, run.progress_at, run.reports = progress, now, run.reports + 1
        if run.quiet_said:  # heard from again: the store said it was silent
            run.quiet_said = False
            self._running_message(run.job_id, now, f"running on {run.alloc.describe()}")
        self.health.reported(run, self.book.classes.get(run.job_id))
        if (start_s := start_seconds(run, progress, now)) is not None:
            self.store.add_restart_time(run.job_id, "start", start_s, now)
        due = run.observed_at is None or now - run.observed_at >= OBSERVE_EVERY_S
        rate = float(progress["samples_per_s"])
        if run.reports > 1 and due and not run.profiling:  # the first report includes start-up and warm-up
            reports.observe(self, run, rate, now)
        if run.profiling:
            if reports.note_profiling_rate(run, rate, self.opt.profile_reports) and run.stop_reason is None:
                reports.observe(self, run, reports.profiled_rate(run.rates), now)
                self._spawn(self.stop_run(run, "profiled", wait=False))
            return True
        reports.note_lost_progress(self.store, run, progress, self.last_steps, now)
        warn_slow_stop(self.store, self.warned, run, progress, grace_s(run.spec, self.opt.stop_grace_s), now)
        self.store.update_progress(run.job_id, int(progress["step"]), float(progress["samples"]),
                                   progress.get("checkpoint"), held * run.alloc.num_gpus, clear_crashes=run.reports > 1,
                                   metrics=training_metrics(progress), current=run.job_id not in self.checkpoints.reclaiming)
        return True

    def _rank_exited(self, rank: RankProc, code: int | None, sig: int | None, reason: str | None) -> None:
        if rank.exited:
            return
        rank.state, rank.exit_code, rank.signal, rank.reason = "exited", code, sig, reason

    def _after_exit(self, run: Run) -> None:
        if run.all_exited and not run.ended.is_set():
            run.ended.set()
            with self.store.batch():  # refused (disk full): none of it; rebuilt when writes come back
                self._finish(run)
            self.notify()

    def _finish(self, run: Run) -> None:
        finish_run(self, run)

    def crashed(self, run: Run, why: str) -> None:
        after_crash(self, run, why)

    async def close(self) -> None:
        await cancel_and_wait(list(self._tasks), 10.0, "executor task")

