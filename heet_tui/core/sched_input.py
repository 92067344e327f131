"""What every scheduling policy is given: a view of the cluster and of the jobs.

These are plain dataclasses so the simulator, the controller and any outside harness can
build them. A throughput function maps ``(gpu_type, placement)`` to samples/s, where a
placement is GPUs per host, largest first (``(4, 2)``); it returns 0 for a configuration the
job cannot run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import type_allowed

ThroughputFn = Callable[[str, tuple[int, ...]], float]


@dataclass(frozen=True, slots=True)
class HostView:
    name: str
    gpu_type: str
    gpu_count: int
    free: tuple[int, ...]  # GPU indices heet may use (busy-with-foreign-process GPUs excluded)
    rack: str = ""
    drained: bool = False


@dataclass(frozen=True, slots=True)
class ClusterView:
    hosts: tuple[HostView, ...]

    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({h.gpu_type for h in self.hosts}))

    def host(self, name: str) -> HostView:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class Constraints:
    """What the user fixed by hand; a policy must respect every one."""

    pinned_type: str | None = None
    fixed_count: int | None = None
    pinned_hosts: tuple[str, ...] = ()
    held: bool = False

    @property
    def is_set(self) -> bool:
        """Whether anything is fixed at all."""
        return bool(self.held or self.pinned_type or self.fixed_count or self.pinned_hosts)

    def describe(self) -> str:
        """"T4 only, 2 GPUs, on h1, h2", "held (no GPUs)"; "" when nothing is fixed."""
        if self.held:
            return "held (no GPUs)"
        return ", ".join([*([f"{self.pinned_type} only"] if self.pinned_type else []),
                          *([f"{self.fixed_count} GPU(s)"] if self.fixed_count else []),
                          *([f"on {', '.join(self.pinned_hosts)}"] if self.pinned_hosts else [])])


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    min_gpus: int
    max_gpus: int
    throughput: ThroughputFn
    gpu_types: tuple[str, ...] = ()  # empty = every type
    current: Allocation | None = None
    remaining_samples: float | None = None  # None: estimate from attained service
    restart_cost_s: float = 30.0
    age_s: float = 0.0
    attained_gpu_s: float = 0.0
    priority: int = 0
    constraints: Constraints = field(default_factory=Constraints)
    requested_gpus: int | None = None  # what the user asked for; rigid policies use it
    submitted_at: float = 0.0
    # Seconds to finish = finish_time_scale x remaining_samples / throughput. A real job's remaining
    # steps are exact (1); a simulated job gains statistical efficiency as it trains, so it finishes
    # sooner than its current rate says. Only predictions (``evaluate``) read it: the policies rank
    # work at the current rate, and a corrected size made them worse (docs/SCHEDULING.md).
    finish_time_scale: float = 1.0
    # Useful samples per sample processed now. The simulator's throughput functions count useful
    # samples (goodput, as Pollux and Sia schedule); people read raw samples/s, which is
    # throughput / this. Real jobs report raw samples/s (1). Only what predictions show reads it.
    statistical_efficiency: float = 1.0

    def allows(self, gpu_type: str) -> bool:
        """An edit narrows what the spec allows, never widens it: a job written for T4s was
        tweaked onto an A100 and ran there."""
        pinned = self.constraints.pinned_type
        return (pinned is None or gpu_type == pinned) and type_allowed(gpu_type, self.gpu_types)
