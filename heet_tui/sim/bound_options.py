"""What a job could at best achieve on each GPU count: the speed options of the lower bound.

The bound (``bound``) must never exceed what some policy could reach, so every number here
is an upper limit on the simulator's physics, never an estimate:

* a job's work is a fixed sum over its epochs, ``sum_e progress_e / n_e``, with each epoch's
  progress normalised by ``n_e``: the statistical gain of the workload's batch (``fixed``: then
  the work is the iterations at that batch, which no schedule changes), or the best progress
  rate any configuration reaches in that epoch (``adaptive``: a policy that may also choose the
  batch, from the validated range, as Pollux and Sia do; the simulator itself keeps batches fixed);
* on ``k`` GPUs of a type a job goes at most ``max_e rate_e / n_e``, maximised over every
  placement of ``k`` GPUs the cluster has (``any``) or over the packed one only (``packed``,
  what goodput-mip and the baselines consider), and over the batches it may train with;
* per GPU type only the upper concave hull of (count, speed) matters: time-sharing two hull
  points gives as much speed per GPU-second as anything under the hull.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from heet_tui.scheduling.lookahead import upper_hull
from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.physics import ModelPhysics
from heet_tui.sim.state import gpu_range
from heet_tui.sim.workload import WorkloadJob

Placement = tuple[int, ...]
PLACEMENT_MODES = ("any", "packed")
BATCH_MODES = ("fixed", "adaptive")
ADAPTIVE_LADDER = 9  # geometric steps between the smallest and largest validated batch


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


def batch_choices(physics: ModelPhysics, batch: int, mode: str) -> list[int]:
    """The workload's batch, or (``adaptive``) every batch a policy choosing it could train with:
    the validated ones and a geometric ladder between the smallest and the largest."""
    if mode == "fixed":
        return [batch]
    sizes = physics.validation.batch_sizes
    ladder = np.geomspace(sizes[0], sizes[-1], ADAPTIVE_LADDER).round().astype(int)
    return sorted({batch, *sizes, *(int(b) for b in ladder)})


def _epoch_rates(physics: ModelPhysics, gpu_type: str, placements: list[Placement], batches: list[int]) -> np.ndarray:
    """Best progress per second in each epoch over these placements and batches."""
    epochs = range(physics.target_epochs)
    best = np.zeros(physics.target_epochs)
    for p in placements:
        for b in batches:
            best = np.maximum(best, [physics.rate(gpu_type, p, b, e) for e in epochs])
    return best


def job_options(spec: WorkloadJob, physics: ModelPhysics, cluster: SimCluster, mode: str,
                batch: str = "fixed") -> list[Option]:
    """The job's hull options on every GPU type, fastest first (empty: it can run nowhere).

    Speeds are normalised per epoch by ``n_e`` (any positive choice gives a valid bound: the
    work is ``sum_e progress_e / n_e``, a configuration's speed its most ``rate_e / n_e``); the
    bound is tightest where ``rate_e / n_e`` hardly moves, so ``n_e`` is the gain of the fixed
    batch, or with ``adaptive`` batches the best rate any configuration reaches in that epoch.
    """
    if mode not in PLACEMENT_MODES or batch not in BATCH_MODES:
        raise ValueError(f"placements must be one of {', '.join(PLACEMENT_MODES)} and batch one of "
                         f"{', '.join(BATCH_MODES)}, got {mode!r} and {batch!r}")
    types = cluster.gpu_types()
    lo, hi = gpu_range(spec, physics, types)
    batches = batch_choices(physics, spec.batch_size, batch)
    rates: dict[tuple[str, int], np.ndarray] = {}
    for t in types:
        table = physics.tables.get(t)
        if table is None:
            continue
        sizes = [n.gpus_per_node for n in cluster.node_types for _ in range(n.count) if n.gpu_type == t]
        for k in range(max(lo, 1), min(hi, sum(sizes), physics.max_gpus(t)) + 1):
            r = _epoch_rates(physics, t, placements_for(k, sizes, table.measured_placements, mode), batches)
            if r.max() > 0:
                rates[(t, k)] = r
    if not rates:
        return []
    v = physics.validation
    if batch == "fixed":
        norm = np.array([v.gain(spec.batch_size, e) for e in range(physics.target_epochs)])
    else:
        norm = np.max(np.stack(list(rates.values())), axis=0)
    if (norm <= 0).any():
        return []
    work = float(sum((v.progress_at(e + 1) - v.progress_at(e)) / norm[e] for e in range(physics.target_epochs)))
    out: list[Option] = []
    for t in types:
        points = [(k, float(np.max(r / norm)) / work) for (tt, k), r in rates.items() if tt == t]
        out.extend(Option(t, k, r) for k, r in upper_hull(points))
    return sorted(out, key=lambda o: (-o.rate, o.count, o.gpu_type))
