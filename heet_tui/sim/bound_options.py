"""What a job could at best achieve on each GPU count: the speed options of the lower bound.

The bound (``bound``) must never exceed what some policy could reach, so every number here
is an upper limit on the simulator's physics, never an estimate:

* a job's work is counted in iterations at its own global batch ``B`` (fixed for the whole
  run): ``W = sum_e progress_e / gain(B, e)`` over its epochs, which no schedule changes;
* on ``k`` GPUs of a type a job does at most ``max_e gain(B_c, e) / gain(B, e) / step_c``
  such iterations per second, maximised over every placement of ``k`` GPUs the cluster has
  (``any``) or over the packed one only (``packed``, what the project's policies consider),
  where ``B_c`` is the batch the configuration really trains with (``ceil(B / k) * k``, capped);
* per GPU type only the upper concave hull of (count, speed) matters: time-sharing two hull
  points gives as much speed per GPU-second as anything under the hull.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from heet_tui.scheduling.lookahead import upper_hull
from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.physics import ModelPhysics
from heet_tui.sim.state import gpu_range
from heet_tui.sim.workload import WorkloadJob

Placement = tuple[int, ...]
PLACEMENT_MODES = ("any", "packed")


@dataclass(frozen=True, slots=True)
class Option:
    """``count`` GPUs of ``gpu_type`` finish at most ``rate`` of the job per second."""

    gpu_type: str
    count: int
    rate: float


def _partitions(total: int, parts: int, caps: Sequence[int], most: int) -> Iterator[Placement]:
    """Placements of ``total`` GPUs on exactly ``parts`` hosts (largest first), host i holding at
    most ``caps[i]`` (host sizes, largest first) and no part above ``most``."""
    if parts == 0:
        if total == 0:
            yield ()
        return
    room = caps[:parts]
    if total < parts or total > sum(min(c, most) for c in room):
        return
    for first in range(min(total - (parts - 1), caps[0], most), 0, -1):
        for rest in _partitions(total - first, parts - 1, caps[1:], first):
            yield (first, *rest)


def placements_for(count: int, host_sizes: Sequence[int], measured: Sequence[Placement], mode: str) -> list[Placement]:
    """Placements of ``count`` GPUs whose speeds together include the fastest one.

    Unmeasured placements are read off the (hosts, GPUs) grid, so one per host count stands
    for all; measured ones each have their own rows and are all candidates.
    """
    sizes = sorted(host_sizes, reverse=True)
    if count <= 0 or count > sum(sizes):
        return []
    if mode == "packed":
        biggest = sizes[0]
        full, rest = divmod(count, biggest)
        return [(biggest,) * full + ((rest,) if rest else ())]
    mine = {p for p in measured if sum(p) == count}
    out: list[Placement] = []
    for hosts in range(1, min(count, len(sizes)) + 1):
        fitting = [p for p in mine if len(p) == hosts and all(a <= b for a, b in zip(p, sizes, strict=False))]
        out.extend(sorted(fitting))
        other = next((p for p in _partitions(count, hosts, sizes, count) if p not in mine), None)
        if other is not None:
            out.append(other)
    return out


def work_iterations(physics: ModelPhysics, batch: int) -> float:
    """Iterations at the job's own batch needed to reach its target, whatever the schedule."""
    v = physics.validation
    return sum((v.progress_at(e + 1) - v.progress_at(e)) / v.gain(batch, e) for e in range(physics.target_epochs))


def _speed(physics: ModelPhysics, gpu_type: str, placement: Placement, batch: int) -> float:
    """Most iterations-at-``batch`` per second this configuration reaches in any epoch."""
    v = physics.validation
    return max(physics.rate(gpu_type, placement, batch, e) / v.gain(batch, e) for e in range(physics.target_epochs))


def job_options(spec: WorkloadJob, physics: ModelPhysics, cluster: SimCluster, mode: str) -> list[Option]:
    """The job's hull options on every GPU type, fastest first (empty: it can run nowhere)."""
    if mode not in PLACEMENT_MODES:
        raise ValueError(f"placements must be one of {', '.join(PLACEMENT_MODES)}, got {mode!r}")
    types = cluster.gpu_types()
    lo, hi = gpu_range(spec, physics, types)
    work = work_iterations(physics, spec.batch_size)
    if work <= 0:
        return []
    out: list[Option] = []
    for t in types:
        table = physics.tables.get(t)
        if table is None:
            continue
        sizes = [n.gpus_per_node for n in cluster.node_types for _ in range(n.count) if n.gpu_type == t]
        points = []
        for k in range(max(lo, 1), min(hi, sum(sizes), physics.max_gpus(t)) + 1):
            best = max((_speed(physics, t, p, spec.batch_size)
                        for p in placements_for(k, sizes, table.measured_placements, mode)), default=0.0)
            if best > 0:
                points.append((k, best / work))
        out.extend(Option(t, k, r) for k, r in upper_hull(points))
    return sorted(out, key=lambda o: (-o.rate, o.count, o.gpu_type))
