"""The simulator's mutable per-job state and the physics of advancing it through time."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobState
from heet_tui.core.sched_input import Constraints
from heet_tui.sim.physics import ModelPhysics
from heet_tui.sim.workload import WorkloadJob


def gpu_range(spec: WorkloadJob, physics: ModelPhysics, gpu_types: Iterable[str]) -> tuple[int, int]:
    """The GPU counts a job may use: the workload's range, else 1 up to the most GPUs its model
    was profiled on (any of ``gpu_types``) or requested. The engine and the lower bound must agree."""
    most = max((physics.max_gpus(t) for t in gpu_types), default=0)
    lo = spec.min_gpus if spec.min_gpus is not None else 1
    hi = spec.max_gpus if spec.max_gpus is not None else max(most, spec.num_replicas, lo)
    return lo, hi


@dataclass(eq=False)
class SimJob:
    """One job inside a simulation. ``progress`` is in the physics' units (iterations at the
    model's smallest validated batch); ``restart_left`` is the checkpoint-restore pause still
    to sit out before the current allocation trains."""

    spec: WorkloadJob
    physics: ModelPhysics
    min_gpus: int
    max_gpus: int
    slowdown: float = 1.0  # >1: real runs slower than the profiles (calibration), 1: profiles as measured
    state: JobState = JobState.QUEUED
    progress: float = 0.0
    epoch: int = 0
    allocation: Allocation | None = None
    restart_left: float = 0.0
    starts: int = 0
    gpu_seconds: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    outcome: str = ""  # "", "done", "unschedulable", "cancelled"
    message: str = ""
    rate: float = 0.0  # progress/s in the last advance (0 while paused)
    constraints: Constraints = field(default_factory=Constraints)
    events: list[str] = field(default_factory=list)
    gpu_types: tuple[str, ...] = ()  # a submitted spec's (the demo's); a workload file's jobs may use any
    priority: int = 0

    @property
    def id(self) -> str:
        return self.spec.name

    @property
    def restarts(self) -> int:
        """Allocation changes after the first start (each one cost a checkpoint-restore)."""
        return max(self.starts - 1, 0)

    @property
    def fraction_done(self) -> float:
        return min(self.progress / self.physics.target_progress, 1.0) if self.physics.target_progress else 1.0

    @property
    def active(self) -> bool:
        return not self.state.terminal

    def progress_rate(self, gpu_type: str, placement: tuple[int, ...], epoch: int | None = None) -> float:
        """True progress/s at a configuration (what the job would really achieve)."""
        e = self.epoch if epoch is None else epoch
        return self.physics.rate(gpu_type, placement, self.spec.batch_size, e) / self.slowdown

    def seconds_to_finish(self, gpu_type: str, placement: tuple[int, ...]) -> float | None:
        """Training seconds left on this configuration (``None``: it cannot run there).

        Summed epoch by epoch, as ``advance`` trains: statistical efficiency rises during
        training, so the current epoch's rate alone overstated a fresh cifar10 job's time ~10x."""
        seconds, progress = 0.0, self.progress
        for epoch in range(self.epoch, self.physics.target_epochs):
            rate = self.progress_rate(gpu_type, placement, epoch)
            if rate <= 0:
                return None
            boundary = self.physics.validation.progress_at(epoch + 1)
            seconds += max(boundary - progress, 0.0) / rate
            progress = max(progress, boundary)
        return seconds

    def finish_time_scale(self) -> float:
        """Time to finish over (progress left / the current epoch's rate), at the workload's batch.

        What a scheduler's view needs to turn "remaining samples / throughput", which is read at
        the current efficiency, into the time the job will really train. A configuration's rate
        differs between epochs only by the statistical gain at the batch it trains with, which is
        the workload's batch up to rounding to whole per-GPU batches, so one factor serves all."""
        left = self.physics.target_progress - self.progress
        if left <= 0 or self.epoch >= self.physics.target_epochs:
            return 1.0
        physics, batch = self.physics, self.spec.batch_size
        now = physics.validation.gain(batch, self.epoch)
        this_epoch = max(physics.validation.progress_at(self.epoch + 1) - self.progress, 0.0)
        if now <= 0:
            return 1.0  # no statistics to correct by: keep the plain estimate
        at_unit_speed = this_epoch / now + physics.gain_weighted_work_from(batch, self.epoch + 1)
        scale = now * at_unit_speed / left
        return scale if 0 < scale < math.inf else 1.0

    def statistical_efficiency(self) -> float:
        """Useful samples per sample now, at the workload's batch: goodput / raw throughput."""
        efficiency = self.physics.efficiency_at(self.spec.batch_size, self.epoch)
        return efficiency if efficiency > 0 else 1.0  # no statistics: show throughput as it is

    def advance(self, seconds: float, start: float) -> float | None:
        """Train for ``seconds`` from wall time ``start``; returns the completion time if the
        job reaches its target inside the interval. Restart pauses come first and make no
        progress; GPU time is charged for the whole interval the allocation is held."""
        alloc = self.allocation
        if alloc is None or alloc.num_gpus == 0 or self.state.terminal:
            self.rate = 0.0
            return None
        used = 0.0
        if self.restart_left > 0:
            pause = min(self.restart_left, seconds)
            self.restart_left -= pause
            used = pause
        placement = alloc.placement
        target_epochs = self.physics.target_epochs
        finished: float | None = None
        self.rate = 0.0
        while used < seconds and finished is None:
            rate = self.progress_rate(alloc.gpu_type, placement)
            if rate <= 0:
                self.message = f"cannot run on {alloc.num_gpus}x{alloc.gpu_type} {placement}: no profile"
                break
            self.rate = rate
            boundary = self.physics.validation.progress_at(self.epoch + 1)
            need = max(boundary - self.progress, 0.0) / rate
            if used + need <= seconds:
                used += need
                self.progress = boundary
                self.epoch += 1
                if self.epoch >= target_epochs:
                    finished = start + used
            else:
                self.progress += rate * (seconds - used)
                used = seconds
        held = (finished - start) if finished is not None else seconds
        self.gpu_seconds += held * alloc.num_gpus
        return finished
