"""Snapshots the controller (or the demo simulator) publishes and the UI renders.

A snapshot is immutable and complete: the UI never has to merge deltas or ask follow-up
questions, so a burst of updates can be coalesced into the latest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.job import JobState
from heet_tui.core.plan import ChangeKind, Plan
from heet_tui.core.sched_input import Constraints


@dataclass(frozen=True, slots=True)
class HostStatus:
    name: str
    state: HostState
    message: str = ""
    gpus: tuple[Gpu, ...] = ()
    rack: str = ""
    gpu_source: str = ""
    last_seen: float | None = None  # controller clock; the UI shows "stale since N s"
    drained: bool = False
    rtt_ms: float | None = None
    gpu_jobs: tuple[tuple[int, str], ...] = ()  # (gpu index, job id) for GPUs in use
    declared_type: str = ""  # the hosts file's GPU type (emulate or gpu_type), known before any connection
    drained_why: str = ""  # what drained it, when known (by hand, removed from the hosts file, found broken)
    launch_blocked: str = ""  # why nothing is launched there now (a full disk, GPUs not read); "" when it is
    warnings: tuple[str, ...] = ()  # what a user must hear about a ready host (GPUs left out, none usable)

    @property
    def gpu_type(self) -> str:
        return self.gpus[0].gpu_type if self.gpus else ""


@dataclass(frozen=True, slots=True)
class JobStatus:
    id: str
    name: str
    state: JobState
    model: str
    allocation: Allocation | None = None
    progress: float = 0.0  # 0..1
    throughput: float = 0.0  # samples/s measured (or simulated)
    eta_s: float | None = None
    restarts: int = 0
    submitted_at: float = 0.0
    min_gpus: int = 1
    max_gpus: int = 1
    message: str = ""
    log_tail: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    restart_s: float | None = None  # what a restart pauses it for, measured; None: not yet measured
    ended_at: float | None = None  # when it ended (done, failed or cancelled)
    metrics: tuple[tuple[str, float], ...] = ()  # the latest loss, accuracy, ... it reported (core/metrics.py)
    spec_file: str = ""  # the file its spec was last read from (submit or update); "" when not known
    edit: Constraints = Constraints()  # what the user fixed for it on the Plan screen (until dropped)
    gpu_types: tuple[str, ...] = ()  # the types its spec allows (empty: any); an edit picks among them
    # a job without a run whose checkpoint is on a host out of reach that shares no filesystem:
    # "c (host-key-changed)"; a start elsewhere trains again from what the new host has
    checkpoint_away: str = ""


@dataclass(frozen=True, slots=True)
class ProfileCell:
    gpu_type: str
    config: str  # placement key, e.g. "4" or "22"
    samples_per_s: float
    measured: bool
    uncertainty: float | None = 0.0  # relative (0.1 = +-10%); None: a rough guess no model backs


@dataclass(frozen=True, slots=True)
class JobProfile:
    job_id: str
    cells: tuple[ProfileCell, ...] = ()
    # (gpu type, placement key) where the job runs, and where the pending plan puts it: the cells
    # plans are made from, which a grid of one-host counts left out (24 RTX2080Ti over 3 hosts)
    runs_on: tuple[str, str] | None = None
    planned_on: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    hosts: tuple[HostStatus, ...] = ()
    jobs: tuple[JobStatus, ...] = ()
    plan: Plan | None = None
    plan_id: int | None = None
    profiles: tuple[JobProfile, ...] = ()
    policy: str = "heet"
    auto_approve: bool = False
    mode: str = "controller"  # or "demo"
    read_only: bool = False  # a controller that only watches: it launches, profiles and applies nothing
    applying_plan: int | None = None  # the approved plan whose steps are being carried out
    # how many running jobs it stops, resizes or moves (None: not said): a plan that only starts
    # queued jobs read "jobs stop, save a checkpoint and start again"
    applying_restarts: int | None = None
    held_why: str = ""  # why auto-approve, on, leaves the pending plan to the user
    viewers: int = 0  # processes attached to the controller (other TUIs, log -f): a quit stops it for them
    interval_s: float = 0.0  # seconds between the controller's rounds (each publishes one); 0: not said
    notices: tuple[str, ...] = field(default=())  # the latest of them
    notices_at: tuple[float, ...] = ()  # when each of ``notices`` was said (empty: not known)
    notices_total: int = 0  # how many notices were ever published (0: not counted; the reader counts ``notices``)
    # Ended jobs beyond the latest few are left out (a lab's store holds thousands); per state,
    # how many, so the counts on screen stay whole.
    hidden_ended: tuple[tuple[JobState, int], ...] = ()
    profiles_hidden: int = 0  # ended jobs whose profiles are left out (only the latest few are kept)
    # why the state store refuses writes, while it does: the controller changes nothing, and what it
    # shows of jobs is as last recorded (a toast said so once, and the screen looked live for minutes)
    store_error: str = ""
    policies: tuple[str, ...] = ()  # the policies this controller knows (the palette offers them)


def starts_without_checkpoint(snap: Snapshot) -> str:
    """What the pending plan's starts lose: a job whose checkpoint is on a host out of reach
    starts from what its new host has. It was said only after the approval, as "resumed behind
    where it was ... 15,780 steps are trained again"."""
    if snap.plan is None:
        return ""
    starting = {c.job_id for c in snap.plan.changes if c.kind is ChangeKind.START}
    away = [f"{j.id} (its checkpoint is on {j.checkpoint_away})" for j in snap.jobs
            if j.id in starting and j.checkpoint_away]
    if not away:
        return ""
    return (f"starts without its checkpoint: {', '.join(away)}; it trains again from what its new host has, and "
            "takes the further checkpoint back if that host returns")
