"""Job specifications and the job life-cycle state machine."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from heet_tui.core.gpu import type_allowed


class TargetKind(StrEnum):
    EPOCHS = "epochs"
    STEPS = "steps"
    SAMPLES = "samples"


def gpu_range(least: int, most: int) -> str:
    """"1-4 GPUs", and "1 GPU" for a rigid job (it read "1-1 GPUs")."""
    return f"{gpu_span(least, most)} GPU{'s' if most != 1 else ''}"


def gpu_span(least: int, most: int) -> str:
    """"1-4", and "2" for a rigid job (it read "2-2") where a column says GPUs."""
    return f"{least}-{most}" if least != most else str(least)


@dataclass(frozen=True, slots=True)
class Target:
    """When a job is done: after ``value`` epochs, steps or samples."""

    kind: TargetKind
    value: float

    def describe(self) -> str:
        """"4,000,000 steps", "2.5 epochs": with :g a target read "4e+06 steps"."""
        return f"{count_text(self.value)} {self.kind.value}"


def count_text(value: float) -> str:
    """A count as people read it: whole ones with thousands separators, others to two places."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


DEFAULT_STOP_GRACE_S = 30.0  # a job's stop grace when its spec sets none (control.execution.ExecOptions)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the user asked for (from ``job.toml``), validated by ``heet_tui.config.job_spec``."""

    name: str
    command: tuple[str, ...]
    model: str
    batch_size: int
    target: Target
    workdir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    min_gpus: int = 1
    max_gpus: int = 1
    gpu_types: tuple[str, ...] = ()  # empty = every type allowed
    priority: int = 0
    checkpoint_dir: str = ""
    dataset_samples: int = 0  # samples per epoch, when the target is in epochs
    stall_timeout_s: int | None = None  # silence that counts as hung; None: the controller's default, 0: never
    stop_grace_s: int | None = None  # SIGTERM to SIGKILL when it is stopped; None: the controller's default

    def allows(self, gpu_type: str) -> bool:
        return type_allowed(gpu_type, self.gpu_types)

    @property
    def gpu_range(self) -> str:
        return gpu_range(self.min_gpus, self.max_gpus)

    @property
    def target_samples(self) -> float:
        """The target in samples, whatever unit the user gave it in."""
        per = {TargetKind.STEPS: self.batch_size, TargetKind.EPOCHS: self.dataset_samples, TargetKind.SAMPLES: 1}
        return self.target.value * per[self.target.kind]


# How a queued job's message starts when no ready host can hold it (control/waiting.py writes
# it; the Plan screen tells such jobs apart from those the policy left out).
CANNOT_START = "cannot start yet: "
# A twin's message while its profile class is profiled through another job (control/profiling_rounds.py).
PLAN_WAITING = "waiting for a plan"  # how a message ends between a job's measuring and the next plan
TWIN_WAITING = "waiting for {}'s profiling (same model and batch size)"
TWIN_WAITING_END = TWIN_WAITING.split("{}")[1]
# A new job's message while no GPU of its types is idle to profile it on.
PROFILE_WAITING = "waiting to be profiled: "
# A planned job's message when the latest plan leaves it without GPUs (control/waiting.py):
# every GPU it may use is taken, or the policy keeps it for a faster type, or by choice.
WAITING_FOR_GPUS = "waiting for GPUs: "
HELD_FOR_FASTER = "held for faster GPUs: "
LEFT_QUEUED = "left queued: "
STARTING = " approved: starting on "  # in a queued job's message while an approved plan starts it
HOST_OUT = "its host"  # how the message of a running job whose host is out of reach begins


class JobState(StrEnum):
    QUEUED = "queued"
    PROFILING = "profiling"
    RUNNING = "running"
    RESIZING = "resizing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


_ALLOWED: dict[JobState, frozenset[JobState]] = {
    # queued -> done: a copy cut off from the controller (on a lost host) finished the training there
    JobState.QUEUED: frozenset({JobState.PROFILING, JobState.RUNNING, JobState.DONE, JobState.CANCELLED,
                                JobState.FAILED}),
    JobState.PROFILING: frozenset({JobState.QUEUED, JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.RESIZING, JobState.QUEUED, JobState.DONE, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.RESIZING: frozenset(
        {JobState.RUNNING, JobState.QUEUED, JobState.DONE, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


RETRYABLE = (JobState.FAILED, JobState.CANCELLED)  # ended jobs a user may put back in the queue (and see retryable)
ACTIVE = tuple(s for s in JobState if not s.terminal)  # jobs cancel and update act on


def retryable(job: Job) -> bool:
    """Failed or cancelled; or done by its script's exit 0 short of its target: a bug in a loop's
    end cost the whole run, retry refused it, and a resubmitted job started from step 0."""
    return job.state in RETRYABLE or (job.state is JobState.DONE and job.short_of_target)


class InvalidTransition(ValueError):
    """A state change the life cycle does not allow (e.g. ``done -> running``)."""


def can_transition(old: JobState, new: JobState) -> bool:
    return new in _ALLOWED[old]


@dataclass(frozen=True, slots=True)
class Job:
    """A submitted job and where it is in its life cycle.

    ``running <-> resizing`` is the elastic loop; ``running -> queued`` is a preemption or a
    lost host (the job resumes from its last checkpoint). Terminal states never change.
    """

    id: str
    spec: JobSpec
    state: JobState = JobState.QUEUED
    submitted_at: float = 0.0
    restarts: int = 0
    samples_done: float = 0.0
    steps_done: int = 0
    attained_gpu_s: float = 0.0
    message: str = ""
    history: tuple[tuple[float, JobState], ...] = field(default=())
    metrics: tuple[tuple[str, float], ...] = ()  # the latest reported (core/metrics.py)

    @property
    def short_of_target(self) -> bool:
        """It reported progress, and less than its target (an epoch target without the dataset's
        size cannot tell): what a job "done" by its script's exit 0 before the end has."""
        target, spec = self.spec.target, self.spec
        if not self.steps_done and not self.samples_done:
            return False
        if target.kind is TargetKind.STEPS:
            return self.steps_done < target.value
        if target.kind is TargetKind.SAMPLES:
            return self.samples_done < target.value
        return spec.dataset_samples > 0 and self.samples_done < target.value * spec.dataset_samples

    @property
    def ended_at(self) -> float | None:
        """When it reached its end state; None while it lives."""
        return self.history[-1][0] if self.state.terminal and self.history else None

    def retried(self, at: float, message: str) -> Job:
        """Back in the queue by the user's hand: the one way out of ``failed`` or ``cancelled``.

        Kept apart from ``transition``, whose table has no way out of an end state, so that a
        late report from a host can never revive an ended job; only an explicit retry does.
        """
        if not retryable(self):
            raise InvalidTransition(f"job {self.id!r} is {self.state.value}: only a failed or cancelled job, or one "
                                    "done short of its target, is retried")
        return replace(self, state=JobState.QUEUED, message=message, history=(*self.history, (at, JobState.QUEUED)))

    def transition(self, new: JobState, at: float, message: str = "") -> Job:
        if not can_transition(self.state, new):
            raise InvalidTransition(f"job {self.id!r}: cannot go from {self.state.value} to {new.value}")
        # Every launch after the first is a restart (a resize, a preemption, a lost host, a
        # retried crash): each pauses the job. Counting only resizes showed 0 for a job that
        # had been relaunched after its host was lost.
        relaunch = new is JobState.RUNNING and any(s is JobState.RUNNING for _, s in self.history)
        restarts = self.restarts + (1 if relaunch else 0)
        return replace(self, state=new, restarts=restarts, message=message, history=(*self.history, (at, new)))
