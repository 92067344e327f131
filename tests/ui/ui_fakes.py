"""A hand-built Backend for the UI tests: small snapshots, every intent recorded.

This is a test double for the UI only (the demo runs the real simulator). Its preview makes the
predicted throughput depend on the tweak, so a test can see the prediction follow the edit.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.intents import ApprovePlan, EditJob, Intent, RejectPlan
from heet_tui.core.job import JobState
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect
from heet_tui.core.snapshot import HostStatus, JobProfile, JobStatus, ProfileCell, Snapshot

TESTS = Path(__file__).resolve().parent.parent


def profile_dir(root: Path) -> Path:
    """A Sia-format profile directory for the demo: a copy of the subset shipped in
    heet_tui/data/profiles (derived from the Sia artifact, cited in its README)."""
    out = root / "profiles"
    for model in ("cifar10", "imagenet"):
        shutil.copytree(TESTS.parent / "heet_tui" / "data" / "profiles" / model, out / model)
    return out


FINGERPRINT = "SHA256:q7Vb3kXo1mZ9d2Y4rT6uW8eA0sC5fH7jK9lN1pR3tU5"


def host(name: str, gpu_type: str, count: int, jobs: dict[int, str], rack: str = "r1",
         state: HostState = HostState.READY, message: str = "", last_seen: float = 99.0) -> HostStatus:
    gpus = tuple(Gpu(i, gpu_type, 16000, source="nvml", utilization=50.0 if i in jobs else 0.0,
                     memory_used_mb=8000 if i in jobs else 0) for i in range(count))
    return HostStatus(name, state, message, gpus, rack, "nvml", last_seen, gpu_jobs=tuple(sorted(jobs.items())))


def job(job_id: str, name: str, state: JobState, alloc: Allocation | None, progress: float, tput: float,
        submitted: float, restarts: int = 0, metrics: tuple[tuple[str, float], ...] = ()) -> JobStatus:
    return JobStatus(job_id, name, state, "cifar10", alloc, progress, tput, 600.0 if alloc else None, restarts,
                     submitted, 1, 4, log_tail=(f"{name} step 10", f"{name} step 20"), events=("submitted",),
                     metrics=metrics)


def small_snapshot(step: int = 0, plan: bool = True) -> Snapshot:
    """Two A100 hosts, one T4 host, four jobs; a plan growing j1 and starting j3."""
    a1 = Allocation.of("j1", "A100", {"a100-1": [0, 1]})
    a2 = Allocation.of("j2", "T4", {"t4-1": [0]})
    hosts = (
        host("a100-1", "A100", 4, {0: "j1", 1: "j1"}),
        host("a100-2", "A100", 4, {}, "r2", state=HostState.UNREACHABLE, message="connection refused",
             last_seen=40.0),
        host("t4-1", "T4", 4, {0: "j2"}, "r2"),
    )
    jobs = (
        job("j1", "resnet", JobState.RUNNING, a1, 0.25 + step * 0.01, 410.0, 1.0, 1, (("loss", 0.4312),)),
        job("j2", "bert", JobState.RUNNING, a2, 0.60, 95.0, 2.0, metrics=(("loss", 0.08714), ("accuracy", 0.9731))),
        job("j3", "yolo", JobState.QUEUED, None, 0.0, 0.0, 3.0),
        job("j4", "ncf", JobState.DONE, None, 1.0, 0.0, 0.5, 2),
    )
    current = {"j1": a1, "j2": a2}
    proposed = {"j1": Allocation.of("j1", "A100", {"a100-1": [0, 1, 2, 3]}), "j2": a2,
                "j3": Allocation.of("j3", "T4", {"t4-1": [1, 2]})}
    effect = PredictedEffect((JobPrediction("j1", 410.0, 790.0, 1800.0, 50.0, after_spread=0.12),
                              JobPrediction("j3", 0.0, 180.0, 5400.0, 0.0, after_spread=None)), avg_jct_s=3000.0,
                             avg_jct_before_s=3600.0)
    profiles = (JobProfile("j1", (ProfileCell("A100", "1", 210.0, True), ProfileCell("A100", "2", 410.0, True),
                                  ProfileCell("A100", "4", 790.0, False, 0.12), ProfileCell("T4", "1", 60.0, False, 0.3))),)
    return Snapshot(now=100.0 + step, hosts=hosts, jobs=jobs,
                    plan=Plan.build(current, proposed, "heet", 100.0, effect) if plan else None,
                    plan_id=7 if plan else None, profiles=profiles, mode="controller")




def with_job(snap: Snapshot, job_id: str, **changes) -> Snapshot:
    """``snap`` with one job's fields changed (what a later snapshot says of it)."""
    return replace(snap, jobs=tuple(replace(j, **changes) if j.id == job_id else j for j in snap.jobs))


class FakeBackend:
    def __init__(self, first: Snapshot | None = None) -> None:
        self.current = first or small_snapshot()
        self.posted: list[Intent] = []
        self.previews: list[EditJob] = []
        self.logs_read: list[str] = []
        self._queue: asyncio.Queue[Snapshot] = asyncio.Queue()

    async def start(self) -> None:
        self._queue.put_nowait(self.current)

    async def stop(self) -> None:
        pass

    def push(self, snap: Snapshot) -> None:
        self.current = snap
        self._queue.put_nowait(snap)

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        while True:
            yield await self._queue.get()

    async def post(self, intent: Intent) -> str:
        self.posted.append(intent)
        if isinstance(intent, ApprovePlan | RejectPlan):
            if intent.plan_id != self.current.plan_id:
                raise ValueError(f"plan #{intent.plan_id} is no longer pending")
            self.push(replace(self.current, plan=None, plan_id=None))
            return f"plan #{intent.plan_id} {'approved' if isinstance(intent, ApprovePlan) else 'rejected'}"
        return f"{type(intent).__name__} done"

    async def job_log(self, job_id: str, lines: int = 200) -> tuple[str, ...]:
        self.logs_read.append(job_id)
        return (f"{job_id} generation 3, rank 0 on h1, last 2 line(s):", "epoch 1 [bold]", "epoch 2")

    async def preview(self, edit: EditJob) -> PredictedEffect:
        self.previews.append(edit)
        count = edit.constraints.fixed_count or 2
        return PredictedEffect((JobPrediction(edit.job_id, 410.0, 200.0 * count, 7200.0 / count, 50.0),),
                               avg_jct_s=3000.0 + count, avg_jct_before_s=3600.0)
