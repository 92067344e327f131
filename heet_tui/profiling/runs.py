"""Profiling runs as data: what to launch, how to read what it printed, what it cost.

The controller launches ``examples/profiling.py`` (or a job's own script) on a host and GPU set
through the cluster layer; everything here is pure so it can be tested without a cluster and
reused by the simulator: the command line for a request, the result parsed from the run's
``@heet-progress`` lines, and the cost in GPU-seconds that the UI and the planner account for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from heet_agent.progress import parse_progress_line

from heet_tui.profiling.configs import Placement, key_of, normalise
from heet_tui.profiling.tensor import JobKey


class ProfilingRunError(ValueError):
    """A profiling run that produced no usable measurement."""


@dataclass(frozen=True, slots=True)
class ProfilingRequest:
    job: JobKey
    gpu_type: str
    placement: Placement
    steps: int = 50
    seconds: float = 30.0
    warmup: int = 3

    @property
    def num_gpus(self) -> int:
        return sum(self.placement)

    def describe(self) -> str:
        return f"{self.job} on {self.num_gpus}x{self.gpu_type} ({key_of(self.placement)})"


@dataclass(frozen=True, slots=True)
class ProfilingResult:
    samples_per_s: float
    steps: int
    samples: int
    final: bool  # False when the run was cut short before it reported its last line


@dataclass(frozen=True, slots=True)
class CostRecord:
    """GPU-seconds spent on one run: every GPU of the placement is held for the whole run."""

    job: JobKey
    gpu_type: str
    placement: str
    wall_s: float
    gpu_seconds: float
    at: float


def profiling_command(python: str, script: str, request: ProfilingRequest, model: str | None = None) -> list[str]:
    """Argument vector for ``examples/profiling.py`` on one host of the request.

    The caller adds the torch.distributed environment (RANK, WORLD_SIZE, ...) per process.
    """
    argv = [python, script, "--batch-size", str(request.job.global_bsz), "--steps", str(request.steps),
            "--seconds", str(request.seconds), "--warmup", str(request.warmup)]
    if model:
        argv += ["--model", model]
    return argv


def parse_run(lines: Iterable[str | bytes]) -> ProfilingResult:
    """The measurement in a run's output: its last progress line (the final one if it printed it).

    Other output is ignored; a run that printed no progress line, or reported zero throughput,
    raises :class:`ProfilingRunError`.
    """
    last: dict | None = None
    final = False
    for line in lines:
        data = parse_progress_line(line)
        if data is None:
            continue
        last = data
        final = bool(data.get("final", False))
    if last is None:
        raise ProfilingRunError("profiling run printed no @heet-progress line")
    rate = float(last["samples_per_s"])
    if rate <= 0:
        raise ProfilingRunError(f"profiling run reported {rate} samples/s at step {last['step']}")
    return ProfilingResult(rate, int(last["step"]), int(last["samples"]), final)


def cost_of(request: ProfilingRequest, wall_s: float, at: float = 0.0) -> CostRecord:
    if wall_s < 0:
        raise ValueError(f"wall time must be >= 0, got {wall_s}")
    placement = normalise(request.placement)
    return CostRecord(request.job, request.gpu_type, key_of(placement), wall_s, wall_s * sum(placement), at)


def total_gpu_seconds(records: Iterable[CostRecord], job: JobKey | None = None) -> float:
    return sum(r.gpu_seconds for r in records if job is None or r.job == job)
