"""The demo backend: the real simulator and scheduler behind the UI, at accelerated time.

``heet-tui --demo`` shows a newcomer queues, plans and approvals without any hosts: the
reference 64-GPU cluster (configs/sim/sia-64gpu.toml) runs a small shared-style workload, one
simulated round (60 s) every ``round_wall_s`` of wall time, in manual-approval mode. All
simulator work runs on one worker thread, so it is serialised and never on the UI's event loop.

Profile data: ``$HEET_PROFILES`` (a Sia-format profile directory), else
``$HEET_SHARED/data/profiles``, else ``<repo>/../shared/data/profiles``, else
``heet_tui/data/profiles`` when the package ships one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from heet_tui.config.job_spec import load_job_specs, spec_paths
from heet_tui.control.demo_inputs import demo_inputs, find_profiles
from heet_tui.core.allocation import placement_key
from heet_tui.core.intents import (
    ApprovePlan,
    CancelJob,
    ConnectHost,
    DrainHost,
    DropEdit,
    EditJob,
    Intent,
    RejectPlan,
    Replan,
    SetAutoApprove,
    SetPolicy,
    SubmitJob,
    TrustHostKey,
)
from heet_tui.core.plan import Plan, PredictedEffect
from heet_tui.core.sched_input import Constraints
from heet_tui.core.snapshot import JobProfile, ProfileCell, Snapshot
from heet_tui.scheduling.evaluate import evaluate
from heet_tui.scheduling.registry import POLICY_NAMES, make_policy
from heet_tui.sim import Simulation, WorkloadJob, load_physics
from heet_tui.sim.estimates import PredictedThroughput
from heet_tui.sim.views import snapshot as sim_snapshot

HOLD_NOTICE = ("demo: the clock waits while a plan is pending; approve (a), reject (r), tweak (e) "
               "or turn on auto-approve (t) on the Plan screen (3)")


class DemoBackend:
    """A Backend over a steppable ``Simulation`` in manual-approval mode."""

    def __init__(self, profiles: Path | None = None, jobs: int = 10, policy: str = "heet",
                 round_wall_s: float = 0.6, cluster: Path | None = None, workload: Path | None = None) -> None:
        """``cluster``, ``workload``: a simulated cluster TOML and a workload CSV of the user's own
        (``heet-tui sim``'s formats), in place of the reference cluster and the demo workload: the
        demo showed the reference cluster alone, so "what would it do on my cluster and my jobs"
        could be asked of ``sim`` only, without the plans and approvals."""
        # Finding the data is cheap and its absence is the likely failure: say so before the UI starts.
        self.profiles = profiles or find_profiles()
        self.jobs, self.policy_name, self.round_wall_s = jobs, policy, round_wall_s
        self.cluster, self.workload, self.workload_label = demo_inputs(self.profiles, jobs, cluster, workload)
        self.sim: Simulation | None = None
        self.source = PredictedThroughput(seed=0)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="heet-demo")
        self._latest: asyncio.Queue[Snapshot] | None = None
        self._task: asyncio.Task[None] | None = None
        self._plan_id = 0
        self._plan_key: object = None
        self._rejected_key: object = None
        self._unapproved: dict[str, Constraints] = {}  # job -> its constraints before an edit no plan approved yet
        self._notices: list[str] = []
        self.paused = False

    @classmethod
    def reference(cls, **kwargs) -> DemoBackend:
        """The reference 64-GPU cluster and the demo workload (built on ``start``, off the event loop)."""
        return cls(**kwargs)

    def _build(self) -> Simulation:
        """Load the cluster, only the profiles the workload needs (loading them all takes seconds), the policy."""
        cluster, workload = self.cluster, self.workload
        available = {p.name for p in self.profiles.iterdir() if any(p.glob("placements-*.csv"))}
        models = {w.application for w in workload} | ({"cifar10"} & available)  # the example jobs' model
        physics = load_physics(self.profiles, cluster.profile_map(), models=models)
        return Simulation(cluster, workload, physics, make_policy(self.policy_name), interval=60.0,
                          manual_approval=True, throughput_source=self.source, source_label=self.workload_label)

    # -- Backend protocol -------------------------------------------------------------------------

    async def start(self) -> None:
        self._latest = asyncio.Queue(maxsize=1)
        self.sim = await self._on_sim(self._build)
        self._publish(await self._on_sim(self._snapshot))
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        assert self._latest is not None, "start() first"
        while True:
            yield await self._latest.get()

    async def post(self, intent: Intent) -> str:
        result = await self._on_sim(lambda: self._carry_out(intent))
        self._publish(await self._on_sim(self._snapshot))
        return result

    async def preview(self, edit: EditJob) -> PredictedEffect:
        return await self._on_sim(lambda: self._preview(edit))

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        if job_id not in self.sim.jobs:
            raise ValueError(f"no job {job_id!r}")
        return (f"{job_id} runs in the simulator (demo): it has no process and no output.",)

    # -- the loop ----------------------------------------------------------------------------------

    async def _on_sim(self, fn):
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _publish(self, snap: Snapshot) -> None:
        assert self._latest is not None
        if self._latest.full():
            self._latest.get_nowait()  # latest-first: a slow UI skips stale snapshots
        self._latest.put_nowait(snap)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.round_wall_s)
            if self.paused or self.sim.finished:
                continue
            if self.sim.manual_approval and self.sim.pending_plan is not None:
                # The demo's clock waits for the user's decision, so a plan can be read before it is
                # replaced by the next round's; the real controller keeps running instead.
                if HOLD_NOTICE not in self._notices:
                    self._notices.append(HOLD_NOTICE)
                    self._publish(await self._on_sim(self._snapshot))
                continue
            try:
                self._publish(await self._on_sim(self._round))
            except Exception as exc:  # a policy bug: say so and stop stepping, keep the UI alive
                self.paused = True
                self._notices.append(f"simulation stopped: {type(exc).__name__}: {exc}")
                self._publish(await self._on_sim(self._snapshot))

    def _round(self) -> Snapshot:
        self.sim.step()
        if self.sim.finished:
            self._notices.append(f"all {len(self.sim.jobs)} jobs finished at t={self.sim.now / 3600:.2f} h; "
                                 "submit more from the palette (ctrl+p)")
        return self._snapshot()

    def _track_plan(self) -> None:
        """Number pending plans; a plan the user rejected is not offered again until it changes."""
        plan = self.sim.pending_plan
        key = None if plan is None else tuple(sorted((j, a.gpu_type, a.hosts) for j, a in plan.allocations.items()))
        if key is not None and key == self._rejected_key:
            self.sim.pending_plan = None
            key = None
        if key is not None and key != self._plan_key:
            self._plan_id += 1
        self._plan_key = key

    def _snapshot(self) -> Snapshot:
        self._track_plan()
        pending = self.sim.pending_plan
        snap = sim_snapshot(self.sim, plan_id=self._plan_id if pending is not None else None,
                            policy=self.policy_name, auto_approve=not self.sim.manual_approval,
                            notices=tuple(self._notices[-5:]))
        snap = replace(snap, notices_total=len(self._notices), policies=POLICY_NAMES)
        if pending is not None and pending.effect.at is None:  # the tweak dialog compares on its clock
            pending = replace(pending, effect=replace(pending.effect, at=pending.created_at))
        if pending is not None:
            pending = replace(pending, effect=replace(pending.effect, jobs=tuple(
                replace(p, after_spread=self._spread(p.job_id, pending.allocations.get(p.job_id)))
                for p in pending.effect.jobs)))
        running = {j.id: j.allocation for j in snap.jobs if j.allocation is not None}
        return replace(snap, plan=pending, profiles=self._profiles(running, pending.allocations if pending else {}))

    def _spread(self, job_id: str, alloc) -> float | None:
        """How far a plan's new speed for the job is off, as the Profiles screen says of its cell: 0
        measured, else its error against the simulated truth. Every figure read as measured (no ±):
        16 A100s at 86k/s, which ran at 51k."""
        job = self.sim.jobs.get(job_id)
        if alloc is None or job is None or alloc.num_gpus == 0:
            return 0.0
        placement = tuple(sorted(alloc.placement, reverse=True))
        if (alloc.gpu_type, placement) in self.source.measured(job_id):
            return 0.0
        truth = job.physics.throughput(alloc.gpu_type, placement, job.spec.batch_size) / job.slowdown
        guess = self.source.predict_raw(job, alloc.gpu_type, placement)
        return abs(guess - truth) / truth if truth > 0 and guess > 0 else None

    def _profiles(self, running: dict, planned: dict) -> tuple[JobProfile, ...]:
        """Per active job: measured cells (what the profiler and the job's own runs saw) and predictions.

        In the simulator the truth is known, so a predicted cell's uncertainty is its actual
        relative error against the simulated physics, not a guess.
        """
        out = []
        for job in self.sim.active_jobs():
            measured = self.source.measured(job.id)
            cells = []
            for gpu_type in self.sim.cluster.gpu_types():
                most = job.physics.max_gpus(gpu_type)
                host = max((n.gpus for n in self.sim.cluster.nodes if n.gpu_type == gpu_type), default=0)
                used = [a.placement for a in (running.get(job.id), planned.get(job.id))
                         if a is not None and a.gpu_type == gpu_type and a.num_gpus]
                for placement in dict.fromkeys([*_placements(host, most), *used]):  # where it runs and would run
                    truth = job.physics.throughput(gpu_type, placement, job.spec.batch_size) / job.slowdown
                    if truth <= 0:
                        continue
                    key = placement_key(placement)
                    if (gpu_type, placement) in measured:
                        cells.append(ProfileCell(gpu_type, key, measured[(gpu_type, placement)], True))
                    else:
                        guess = self.source.predict_raw(job, gpu_type, placement)
                        if guess > 0:
                            cells.append(ProfileCell(gpu_type, key, guess, False, abs(guess - truth) / truth))
            out.append(JobProfile(job.id, tuple(cells), _where(running.get(job.id)), _where(planned.get(job.id))))
        return tuple(out)

    # -- intents -----------------------------------------------------------------------------------

    def _require_plan(self, plan_id: int) -> Plan:
        if self.sim.pending_plan is None or plan_id != self._plan_id:
            raise ValueError(f"plan #{plan_id} is no longer pending" + (
                f" (plan #{self._plan_id} is)" if self.sim.pending_plan is not None else ""))
        return self.sim.pending_plan

    def _carry_out(self, intent: Intent) -> str:
        sim = self.sim
        match intent:
            case ApprovePlan(plan_id):
                plan = self._require_plan(plan_id)
                sim.approve()
                self._unapproved.clear()
                return f"plan #{plan_id} applied: {len(plan.changes)} change(s)"
            case RejectPlan(plan_id):
                self._require_plan(plan_id)
                self._rejected_key = self._plan_key
                sim.reject()
                # as the controller does (intents.py): the help says rejecting takes the tweak back
                undone, self._unapproved = self._unapproved, {}
                for job_id, before in undone.items():
                    sim.set_constraints(job_id, before)
                if undone:
                    sim.replan()
                took_back = f"; your edit(s) to {', '.join(undone)} taken back" if undone else ""
                return f"plan #{plan_id} rejected{took_back}; it is not proposed again unless something changes"
            case Replan():
                self._rejected_key = None
                sim.replan()
                return "planning again"
            case EditJob(_, job_id, constraints):  # as the controller: whatever plan is pending, or none
                if job_id in sim.jobs:
                    self._unapproved.setdefault(job_id, sim.jobs[job_id].constraints)
                sim.set_constraints(job_id, constraints)
                self._rejected_key = None
                sim.replan()
                return f"{job_id} tweaked; plan re-proposed"
            case DropEdit(job_id):
                sim.set_constraints(job_id, Constraints())
                self._rejected_key = None
                sim.replan()
                return f"{job_id}: edit dropped; plans place it freely again"
            case SubmitJob(spec_path):
                return self._submit(spec_path)
            case CancelJob(job_id):
                sim.cancel(job_id)
                sim.replan()
                return f"{job_id} cancelled"
            case SetPolicy(name):
                sim.set_policy(make_policy(name))
                self.policy_name = name
                self._rejected_key = None
                sim.replan()
                return f"policy is now {name}"
            case SetAutoApprove(enabled):
                sim.manual_approval = not enabled
                if enabled and sim.pending_plan is not None:
                    sim.approve()
                    self._unapproved.clear()
                return "auto-approve " + ("on: plans apply as they are made" if enabled else "off")
            case DrainHost() | ConnectHost() | TrustHostKey():
                raise ValueError("the demo's hosts are simulated: there is nothing to drain, connect or trust")
        # "the demo cannot do RetryJob": the class name, not what the user asked for
        raise ValueError("the demo's jobs are simulated from a workload: they cannot be retried or updated")

    def _submit(self, spec_path: str) -> str:
        from heet_tui.config.errors import ConfigError

        try:  # a directory or a glob, as the prompt offers: "is a directory, expected a TOML file"
            specs, _, problems = load_job_specs(spec_paths(spec_path))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if problems:
            raise ValueError("; ".join(problems) + "; nothing submitted")
        for spec in specs:
            if spec.model not in self.sim.physics.models:
                known = ", ".join(sorted(self.sim.physics.models))
                raise ValueError(f"{Path(spec_path).name}: the simulator has no profile for model "
                                 f'"{spec.model}" (it has: {known})')
        names = []
        for spec in specs:
            name, n = spec.name, 1
            while name in self.sim.jobs:
                n += 1
                name = f"{spec.name}-{n}"
            self.sim.submit(WorkloadJob(name, self.sim.now, spec.model, max(spec.min_gpus, 1), spec.batch_size,
                                        spec.min_gpus, spec.max_gpus), spec.gpu_types, spec.priority)
            names.append(name)
        self._rejected_key = None
        self.sim.replan()
        spec = specs[0]
        types = f" on {', '.join(spec.gpu_types)}" if spec.gpu_types else ""
        # the profiles measured training to the model's validation target: a spec's own target
        # (300 steps, say) ran as a whole cifar10 training, unsaid
        return (f"submitted {', '.join(names)} ({spec.model}, {spec.gpu_range}{types}): "
                f"profiling, then planned; the demo trains it to {spec.model}'s validation target, as its profiles "
                "measured, not to the spec's target")

    def _preview(self, edit: EditJob) -> PredictedEffect:
        job = self.sim.jobs.get(edit.job_id)
        if job is None or not job.active:
            raise ValueError(f"{edit.job_id} is not an active job")
        before = job.constraints
        job.constraints = edit.constraints
        try:
            plan = self.sim.policy.plan(self.sim.cluster_view(), self.sim.job_views(), self.sim.now)
            effect = plan.effect
            if not effect.jobs:
                effect = evaluate(plan, self.sim.cluster_view(), self.sim.job_views(), self.sim.now)
        finally:
            job.constraints = before
        return replace(effect, at=self.sim.now)


def _where(alloc) -> tuple[str, str] | None:
    return (alloc.gpu_type, placement_key(alloc.placement)) if alloc is not None and alloc.num_gpus else None


def _placements(host_gpus: int, most: int) -> list[tuple[int, ...]]:
    """Single-host powers of two up to a host, then whole hosts, up to what the job was profiled for."""
    out: list[tuple[int, ...]] = []
    k = 1
    while k <= min(host_gpus, most):
        out.append((k,))
        k *= 2
    hosts = 2
    while host_gpus and hosts * host_gpus <= most and hosts <= 4:
        out.append((host_gpus,) * hosts)
        hosts *= 2
    return out

