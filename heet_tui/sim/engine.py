"""The round-based simulation loop (see the package docstring for the API in use)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobState
from heet_tui.core.plan import Plan, classify
from heet_tui.core.sched_input import ClusterView, Constraints, HostView, JobView
from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.errors import PolicyError, SimInputError
from heet_tui.sim.estimates import OracleThroughput, PredictedThroughput, ThroughputSource
from heet_tui.sim.feasibility import never_given, never_runs
from heet_tui.sim.physics import Physics
from heet_tui.sim.state import SimJob, gpu_range
from heet_tui.sim.workload import WorkloadJob

# With the cluster idle, jobs queued, nothing left to arrive and the policy still allocating
# nothing, waiting longer cannot help: after this many rounds those jobs are "unschedulable".
MAX_IDLE_ROUNDS = 240

EventSink = Callable[[dict], None]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job's outcome, for metrics and the events file."""

    name: str
    application: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    gpu_seconds: float
    restarts: int
    outcome: str
    message: str = ""

    @property
    def jct_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.submitted_at


@dataclass
class RoundStats:
    times: list[float] = field(default_factory=list)
    gpus_in_use: list[int] = field(default_factory=list)
    sched_ms: list[float] = field(default_factory=list)


def _source_for(oracle: bool, predictor: str, seed: int, host_sizes: dict[str, int]) -> ThroughputSource:
    """The oracle, the profiling model (``"model"``, what heet runs with) or the simple
    power-law predictor (``"simple"``, no fitting: for very large runs)."""
    if oracle:
        return OracleThroughput()
    if predictor == "model":
        from heet_tui.sim.profiled import ProfiledThroughput

        return ProfiledThroughput(seed=seed, host_sizes=host_sizes)
    if predictor == "simple":
        return PredictedThroughput(seed=seed, host_sizes=host_sizes)
    raise ValueError(f"unknown predictor {predictor!r} (model or simple)")


class Simulation:
    """A steppable simulated cluster running one policy over one workload."""

    def __init__(self, cluster: SimCluster, workload: Sequence[WorkloadJob], physics: Physics, policy: object,
                 *, interval: float = 60.0, oracle: bool = True, seed: int = 0, manual_approval: bool = False,
                 events: EventSink | None = None, slowdowns: dict[str, float] | None = None,
                 throughput_source: ThroughputSource | None = None, source_label: str = "",
                 predictor: str = "model") -> None:
        if not 0 < interval < float("inf"):
            raise ValueError(f"interval must be a positive number of seconds, got {interval}")
        self.cluster = cluster
        self.physics = physics
        self.policy = policy
        self.interval = float(interval)
        self.manual_approval = manual_approval
        self.now = 0.0
        self.rounds = 0
        self.last_plan: Plan | None = None
        self.pending_plan: Plan | None = None
        self.stats = RoundStats()
        self._events = events
        self._slowdowns = dict(slowdowns or {})
        self._nodes = cluster.nodes
        self._type_capacity = {t: cluster.gpus_of_type(t) for t in cluster.gpu_types()}
        self._host_size: dict[str, int] = {}  # the largest node of each GPU type (nodes of one type may differ)
        for t in cluster.node_types:
            self._host_size[t.gpu_type] = max(self._host_size.get(t.gpu_type, 1), t.gpus_per_node)
        self._source: ThroughputSource = throughput_source or _source_for(oracle, predictor, seed, self._host_size)
        self._arrivals: list[SimJob] = [self._make_job(w, source_label) for w in workload]
        self._arrivals.sort(key=lambda j: j.spec.time)
        self._next_arrival = 0
        self.jobs: dict[str, SimJob] = {}
        self._active: dict[str, SimJob] = {}  # the non-terminal subset of jobs, in admission order
        self._idle_rounds = 0

    # -- construction -------------------------------------------------------------------
    def _make_job(self, w: WorkloadJob, label: str) -> SimJob:
        try:
            phys = self.physics.get(w.application)
        except KeyError:
            known = ", ".join(self.physics.available or sorted(self.physics.models)) or "none"
            where = f"{label}:{w.line}: " if label else ""
            raise SimInputError(f"{where}job {w.name!r}: unknown application {w.application!r} "
                                f"(profiles in {self.physics.root or 'the profile directory'}: {known})") from None
        lo, hi = gpu_range(w, phys, self._type_capacity)
        return SimJob(w, phys, lo, hi, slowdown=self._slowdowns.get(w.application, 1.0))

    def submit(self, w: WorkloadJob, gpu_types: tuple[str, ...] = (), priority: int = 0) -> None:
        """Add a job at the current time (the demo's "submit"); its ``time`` is ignored."""
        if w.name in self.jobs or any(j.id == w.name for j in self._arrivals[self._next_arrival:]):
            raise ValueError(f"job {w.name!r} already exists")
        job = self._make_job(WorkloadJob(w.name, self.now, w.application, w.num_replicas, w.batch_size,
                                         w.min_gpus, w.max_gpus, w.line), "")
        job.gpu_types, job.priority = tuple(gpu_types), priority
        self._admit(job)

    # -- accessors ----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._next_arrival >= len(self._arrivals) and not self._active

    @property
    def jobs_ended(self) -> int:
        """Jobs done, unschedulable or cancelled so far."""
        return len(self.jobs) - len(self._active)

    @property
    def total_jobs(self) -> int:
        return len(self._arrivals)

    def active_jobs(self) -> list[SimJob]:
        return list(self._active.values())

    def gpus_in_use(self) -> int:
        return sum(j.allocation.num_gpus for j in self._active.values() if j.allocation is not None)

    def _retire(self, job: SimJob) -> None:
        self._active.pop(job.id, None)
        forget = getattr(self._source, "forget", None)
        if forget is not None:
            forget(job.id)

    def records(self) -> list[JobRecord]:
        out = []
        for j in self.jobs.values():
            out.append(JobRecord(j.id, j.spec.application, j.spec.time, j.started_at, j.finished_at,
                                 j.gpu_seconds, j.restarts, j.outcome or j.state.value, j.message))
        return out

    def eta_s(self, job: SimJob) -> float | None:
        """Seconds to completion if the job keeps its allocation (restart pause included)."""
        alloc = job.allocation
        if not job.active or alloc is None:
            return None
        left = job.seconds_to_finish(alloc.gpu_type, alloc.placement)
        return None if left is None else job.restart_left + left

    # -- the round ----------------------------------------------------------------------
    def step(self) -> None:
        """One round: advance running jobs by ``interval``, admit arrivals, plan, apply (or
        hold the plan for :meth:`approve` in manual-approval mode)."""
        self._skip_idle()
        start = self.now
        for job in self.active_jobs():
            done_at = job.advance(self.interval, start)
            if job.allocation is not None and job.rate > 0:
                self._source.observe(job, job.allocation.gpu_type, job.allocation.placement)
            if done_at is not None:
                self._finish(job, done_at)
            elif job.state is JobState.RESIZING and job.restart_left <= 0:
                job.state = JobState.RUNNING
        self.now = start + self.interval
        self.rounds += 1
        while self._next_arrival < len(self._arrivals) and self._arrivals[self._next_arrival].spec.time <= self.now:
            self._admit(self._arrivals[self._next_arrival])
            self._next_arrival += 1
        plan = self._plan()
        if plan is not None:
            if self.manual_approval:
                self.pending_plan = plan if not plan.is_empty else None
            else:
                self._apply(plan)
        self.stats.times.append(self.now)
        self.stats.gpus_in_use.append(self.gpus_in_use())
        self._guard_starvation()

    def _skip_idle(self) -> None:
        """Empty rounds up to the next arrival change nothing: jump them (a workload stamped in
        Unix seconds stepped through 29 million rounds from t=0)."""
        if not self._active and self._next_arrival < len(self._arrivals):
            rounds = max(0, math.ceil(self._arrivals[self._next_arrival].spec.time / self.interval) - 1 - self.rounds)
            self.now, self.rounds = self.now + rounds * self.interval, self.rounds + rounds

    def approve(self) -> None:
        """Apply the plan held for approval (manual mode); restarts begin now."""
        if self.pending_plan is None:
            raise ValueError("no plan is waiting for approval")
        plan, self.pending_plan = self.pending_plan, None
        # Jobs cancelled or finished since the plan was made simply drop out of it.
        live = {j: a for j, a in plan.allocations.items() if j in self._active}
        if len(live) != len(plan.allocations):
            current = {j.id: j.allocation for j in self._active.values() if j.allocation is not None}
            plan = Plan.build(current, live, plan.policy, self.now, plan.effect)
        self._apply(plan)

    def reject(self) -> None:
        if self.pending_plan is None:
            raise ValueError("no plan is waiting for approval")
        self.pending_plan = None

    def replan(self) -> Plan | None:
        """Plan again now without advancing time (after an edit in the demo)."""
        plan = self._plan()
        if self.manual_approval:
            self.pending_plan = plan if plan is not None and not plan.is_empty else None
        return plan

    def set_constraints(self, job_id: str, constraints: Constraints) -> None:
        self._job(job_id).constraints = constraints

    def set_policy(self, policy: object) -> None:
        self.policy = policy

    def cancel(self, job_id: str) -> None:
        job = self._job(job_id)
        if not job.active:
            raise ValueError(f"job {job_id!r} is already {job.state.value}")
        job.allocation = None
        job.state = JobState.CANCELLED
        job.outcome = "cancelled"
        job.finished_at = None
        self._retire(job)
        self._emit(job, "cancelled")

    def run(self, on_round: Callable[[Simulation], None] | None = None) -> list[JobRecord]:
        """Step until every job is done or unschedulable."""
        while not self.finished:
            self.step()
            if on_round is not None:
                on_round(self)
        return self.records()

    # -- internals ----------------------------------------------------------------------
    def _job(self, job_id: str) -> SimJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise ValueError(f"no job {job_id!r}")
        return job

    def _emit(self, job: SimJob, event: str, at: float | None = None, **extra: object) -> None:
        t = self.now if at is None else at
        job.events.append(f"{t:.0f}s {event}")
        if self._events is not None:
            self._events({"t": round(t, 3), "job": job.id, "event": event, **extra})

    def _admit(self, job: SimJob) -> None:
        self.jobs[job.id] = job
        self._active[job.id] = job
        self._emit(job, "submit", at=job.spec.time, application=job.spec.application,
                   num_replicas=job.spec.num_replicas, batch_size=job.spec.batch_size)
        why = (never_runs(job, self._type_capacity, self._host_size)
               or never_given(job, self.policy, self._type_capacity, self._host_size))
        if why:
            job.state = JobState.FAILED
            job.outcome = "unschedulable"
            job.message = why
            self._retire(job)
            self._emit(job, "unschedulable", reason=why)
            return
        self._source.admit(job)

    def _finish(self, job: SimJob, at: float) -> None:
        job.finished_at = at
        job.state = JobState.DONE
        job.outcome = "done"
        job.allocation = None
        job.rate = 0.0
        self._retire(job)
        self._emit(job, "done", at=at, jct_s=round(at - job.spec.time, 3), restarts=job.restarts)

    def cluster_view(self) -> ClusterView:
        return ClusterView(tuple(HostView(n.name, n.gpu_type, n.gpus, tuple(range(n.gpus)), rack=n.node_type)
                                 for n in self._nodes))

    def job_views(self) -> list[JobView]:
        views = []
        for job in self.active_jobs():
            remaining = max(job.physics.target_progress - job.progress, 0.0) * job.physics.init_batch_size
            views.append(JobView(
                id=job.id, min_gpus=job.min_gpus, max_gpus=job.max_gpus, throughput=self._source.view(job),
                current=job.allocation, remaining_samples=remaining, restart_cost_s=job.physics.restart_s,
                age_s=self.now - job.spec.time, attained_gpu_s=job.gpu_seconds, constraints=job.constraints,
                requested_gpus=job.spec.num_replicas, submitted_at=job.spec.time,
                finish_time_scale=job.finish_time_scale(),
                statistical_efficiency=job.statistical_efficiency(), gpu_types=job.gpu_types, priority=job.priority,
            ))
        return views

    def _plan(self) -> Plan | None:
        views = self.job_views()
        if not views:
            return None
        prepare = getattr(self._source, "prepare", None)
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        plan = self.policy.plan(self.cluster_view(), views, self.now)  # type: ignore[attr-defined]
        self.stats.sched_ms.append((time.perf_counter() - t0) * 1000.0)
        self.last_plan = plan
        return plan

    def _check(self, plan: Plan) -> None:
        name = getattr(self.policy, "name", type(self.policy).__name__)
        hosts = {n.name: n for n in self._nodes}
        used: dict[tuple[str, int], str] = {}
        for job_id, alloc in plan.allocations.items():
            job = self.jobs.get(job_id)
            if job is None or not job.active:
                raise PolicyError(f"policy {name!r} allocated GPUs to {job_id!r}, which is not an active job")
            for host, gpus in alloc.hosts:
                node = hosts.get(host)
                if node is None:
                    raise PolicyError(f"policy {name!r}: job {job_id!r} placed on unknown host {host!r}")
                if node.gpu_type != alloc.gpu_type:
                    raise PolicyError(f"policy {name!r}: job {job_id!r} is {alloc.gpu_type} but host {host!r} "
                                      f"has {node.gpu_type}")
                for g in gpus:
                    if not 0 <= g < node.gpus:
                        raise PolicyError(f"policy {name!r}: job {job_id!r}: host {host!r} has no GPU {g}")
                    other = used.setdefault((host, g), job_id)
                    if other != job_id:
                        raise PolicyError(f"policy {name!r}: GPU {host}[{g}] given to both {other!r} and {job_id!r}")

    def _apply(self, plan: Plan) -> None:
        self._check(plan)
        for job in self.active_jobs():
            before, after = job.allocation, plan.allocations.get(job.id)
            kind = classify(before, after)
            if kind is None:
                continue
            if after is None or after.num_gpus == 0:
                job.allocation = None
                job.restart_left = 0.0
                job.state = JobState.QUEUED
                self._emit(job, "preempt")
                continue
            job.allocation = Allocation(after.job_id, after.gpu_type, after.hosts)
            job.restart_left = job.physics.restart_s
            job.starts += 1
            if job.started_at is None:
                job.started_at = self.now
            job.state = JobState.RUNNING if before is None else JobState.RESIZING
            self._emit(job, kind.value, gpu_type=after.gpu_type, gpus=after.num_gpus,
                       placement=list(after.placement), restart_s=job.physics.restart_s)

    def _guard_starvation(self) -> None:
        # A job placed where it cannot run (a prediction the physics refutes) makes no progress either.
        active = self.active_jobs()
        waiting = [j for j in active if j.allocation is None or (j.rate <= 0 and j.restart_left <= 0)]
        moving = len(waiting) < len(active)
        if moving or not waiting or self._next_arrival < len(self._arrivals) or self.manual_approval:
            self._idle_rounds = 0
            return
        self._idle_rounds += 1
        if self._idle_rounds < MAX_IDLE_ROUNDS:
            return
        for job in waiting:
            job.state = JobState.FAILED
            job.outcome = "unschedulable"
            if job.allocation is not None:
                job.message = f"made no progress for {MAX_IDLE_ROUNDS} rounds: {job.message}"
            else:
                most = max(self._type_capacity.values(), default=0)  # a rigid count no type holds: say so
                asks = (f"; it asks for {job.spec.num_replicas} GPUs, the most of one type is {most}"
                        if job.spec.num_replicas > most else "")
                job.message = (f"policy {getattr(self.policy, 'name', '?')!r} allocated nothing for "
                               f"{MAX_IDLE_ROUNDS} rounds while the cluster was idle{asks}")
            job.allocation = None
            self._retire(job)
            self._emit(job, "unschedulable", reason=job.message)
