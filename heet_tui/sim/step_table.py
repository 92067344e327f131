"""Step time of one model on one node type at any placement and local batch size.

The Sia profiles measure explicit small placements (``placements-*.csv``) and evenly spread
large ones (``scalability-*.csv``). A simulated job can land on a placement neither measured
(five 4-GPU nodes, say), so this table answers in three steps: the exact placement's curve if
measured; else a grid over (nodes, GPUs) built from both files, interpolated linearly in GPU
count at each node count and then in node count; else the nearest measured node count with
the same GPU count. Beyond the largest measured GPU count there is no answer: extrapolating a
job's scaling past what anyone ran would invent the very signal the scheduler competes on.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import lru_cache

from heet_tui.profiling.sia_format import NodeProfile

Placement = tuple[int, ...]
StepSync = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Curve:
    """Step and sync seconds against local batch size; duplicate measurements averaged."""

    bsz: tuple[float, ...]
    step: tuple[float, ...]
    sync: tuple[float, ...]

    @staticmethod
    def build(points: list[tuple[float, float, float]]) -> Curve:
        acc: dict[float, list[tuple[float, float]]] = {}
        for b, s, y in points:
            acc.setdefault(float(b), []).append((s, y))
        keys = sorted(acc)
        return Curve(tuple(keys),
                     tuple(sum(p[0] for p in acc[k]) / len(acc[k]) for k in keys),
                     tuple(sum(p[1] for p in acc[k]) / len(acc[k]) for k in keys))

    @property
    def max_bsz(self) -> float:
        return self.bsz[-1]

    def at(self, b: float) -> StepSync | None:
        """Linear in batch size inside the range; the smallest measurement below it (a step
        never gets cheaper than at the smallest batch anyone measured); unknown above it."""
        if b > self.bsz[-1] * 1.0001:
            return None
        if b <= self.bsz[0] or len(self.bsz) == 1:
            return self.step[0], self.sync[0]
        i = min(bisect.bisect_left(self.bsz, b), len(self.bsz) - 1)
        b0, b1 = self.bsz[i - 1], self.bsz[i]
        w = (b - b0) / (b1 - b0)
        return (self.step[i - 1] + w * (self.step[i] - self.step[i - 1]),
                self.sync[i - 1] + w * (self.sync[i] - self.sync[i - 1]))


def _lerp(a: StepSync, b: StepSync, w: float) -> StepSync:
    return a[0] + w * (b[0] - a[0]), a[1] + w * (b[1] - a[1])


class StepTable:
    """Step/sync lookups for one (model, node type); results are cached per query."""

    def __init__(self, node: NodeProfile) -> None:
        exact: dict[Placement, list[tuple[float, float, float]]] = {}
        grid: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
        for r in node.placement_rows:
            exact.setdefault(r.placement, []).append((r.local_bsz, r.step_time, r.sync_time))
            grid.setdefault((len(r.placement), sum(r.placement)), []).append(
                (r.local_bsz, r.step_time, r.sync_time))
        for s in node.scalability_rows:
            grid.setdefault((s.num_nodes, s.num_replicas), []).append((s.local_bsz, s.step_time, s.sync_time))
        self.gpu_type = node.gpu_type
        self._exact = {p: Curve.build(v) for p, v in exact.items()}
        self._grid = {k: Curve.build(v) for k, v in grid.items()}
        self._by_nodes: dict[int, list[int]] = {}
        for n, r in sorted(self._grid):
            self._by_nodes.setdefault(n, []).append(r)
        self.max_gpus = max((r for _, r in self._grid), default=0)
        self.lookup = lru_cache(maxsize=65536)(self._lookup)
        self.max_local_bsz = lru_cache(maxsize=4096)(self._max_local_bsz)

    @property
    def measured_placements(self) -> tuple[Placement, ...]:
        """Placements with rows of their own; any other placement is read off the (nodes, GPUs) grid."""
        return tuple(self._exact)

    def _at_nodes(self, n: int, replicas: int, b: float) -> StepSync | None:
        rs = self._by_nodes[n]
        i = bisect.bisect_left(rs, replicas)
        if i < len(rs) and rs[i] == replicas:
            return self._grid[(n, replicas)].at(b)
        if i == 0 or i == len(rs):
            return None
        lo, hi = self._grid[(n, rs[i - 1])].at(b), self._grid[(n, rs[i])].at(b)
        if lo is None or hi is None:
            return None
        return _lerp(lo, hi, (replicas - rs[i - 1]) / (rs[i] - rs[i - 1]))

    def _lookup(self, placement: Placement, b: float) -> StepSync | None:
        """``(step_time, sync_time)`` at ``placement`` (largest first) with local batch ``b``."""
        if not placement or sum(placement) > self.max_gpus:
            return None
        curve = self._exact.get(placement)
        if curve is not None:
            value = curve.at(b)
            if value is not None:
                return value
        nodes, replicas = len(placement), sum(placement)
        known = {n: v for n in self._by_nodes if (v := self._at_nodes(n, replicas, b)) is not None}
        if not known:
            return None
        if nodes in known:
            return known[nodes]
        ns = sorted(known)
        i = bisect.bisect_left(ns, nodes)
        if 0 < i < len(ns):
            n0, n1 = ns[i - 1], ns[i]
            return _lerp(known[n0], known[n1], (nodes - n0) / (n1 - n0))
        return known[ns[0] if i == 0 else ns[-1]]

    def _max_local_bsz(self, placement: Placement) -> float:
        """Largest local batch measured at this placement: the memory limit a job must respect
        (beyond it a real job accumulates gradients over several micro-steps)."""
        curve = self._exact.get(placement)
        if curve is not None:
            return curve.max_bsz
        nodes, replicas = len(placement), sum(placement)
        wider = [c.max_bsz for (n, r), c in self._grid.items() if n >= nodes and r >= replicas]
        first = max(wider) if wider else max((c.max_bsz for c in self._grid.values()), default=0.0)
        # no larger than the step times read for this placement go: 14 GPUs on 4 nodes took the
        # largest batch any curve measured (80) where the 3-node curves it is read from stop at 40,
        # ran at no speed, and held their GPUs for hours until the job was called unschedulable
        for b in [first, *sorted({c.max_bsz for c in self._grid.values() if c.max_bsz < first}, reverse=True)]:
            if self.lookup(placement, b) is not None:
                return b
        return 0.0
