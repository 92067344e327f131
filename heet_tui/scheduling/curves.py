"""Throughput functions for benchmarks and tests: from measured profiles, or synthetic.

Policies only see ``(gpu_type, placement) -> samples/s``. The benchmark and the property
tests need many such functions; building them from the Sia profile data keeps the shapes
real (host boundaries cost, GPU types scale differently). Where no profile exists (no
profile directory, or a placement nobody measured) a documented fallback is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AmdahlCurve:
    """Synthetic curve: per-GPU speed x k / (1 + serial x (k - 1)), times a per-extra-host cost.

    ``speed`` maps GPU type to one-GPU samples/s; ``cross_host`` is the fraction kept per
    additional host (all-reduce over the network instead of NVLink/PCIe).
    """

    speed: Mapping[str, float]
    serial: float = 0.05
    cross_host: float = 0.85

    def __call__(self, gpu_type: str, placement: tuple[int, ...]) -> float:
        base = self.speed.get(gpu_type, 0.0)
        k = sum(placement)
        if k <= 0 or base <= 0:
            return 0.0
        return base * k / (1.0 + self.serial * (k - 1)) * self.cross_host ** (len(placement) - 1)


class ProfileCurve:
    """Measured throughput of one model at a fixed local batch size (weak scaling).

    Exact profiled placements are used as measured. An unprofiled placement takes the
    profiled placement with the same GPU count and the nearest host count (more hosts
    preferred: it errs slow); failing that, the best profiled placement with fewer GPUs (no
    gain assumed from the extra GPUs, so nothing is extrapolated upward).
    """

    def __init__(self, by_type: Mapping[str, object], local_bsz: float, scale: Mapping[str, float] | None = None,
                 alias: Mapping[str, str] | None = None) -> None:
        self._table: dict[str, dict[tuple[int, ...], float]] = {}
        self._alias = dict(alias or {})
        self._scale = dict(scale or {})
        for gpu_type, node in by_type.items():
            table = _table_at(node, local_bsz)
            if not table:  # this type never ran that batch: use its own median profiled batch
                own = sorted({r.local_bsz for r in node.placement_rows})  # type: ignore[attr-defined]
                table = _table_at(node, own[len(own) // 2]) if own else {}
            if table:
                self._table[gpu_type] = table
        self._memo: dict[tuple[str, tuple[int, ...]], float] = {}

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted(set(self._table) | set(self._alias)))

    def __call__(self, gpu_type: str, placement: tuple[int, ...]) -> float:
        key = (gpu_type, placement)
        value = self._memo.get(key)
        if value is None:
            value = self._lookup(gpu_type, placement)
            self._memo[key] = value
        return value

    def _lookup(self, gpu_type: str, placement: tuple[int, ...]) -> float:
        source = self._alias.get(gpu_type, gpu_type)
        table = self._table.get(source)
        if not table or not placement:
            return 0.0
        factor = self._scale.get(gpu_type, 1.0)
        p = tuple(sorted(placement, reverse=True))
        if p in table:
            return table[p] * factor
        k, hosts = sum(p), len(p)
        same = [q for q in table if sum(q) == k]
        if same:
            q = min(same, key=lambda q: (abs(len(q) - hosts), -len(q)))
            return table[q] * factor
        fewer = [v for q, v in table.items() if sum(q) < k and len(q) <= max(hosts, 1)]
        return max(fewer, default=0.0) * factor


def _table_at(node: object, local_bsz: float) -> dict[tuple[int, ...], float]:
    table: dict[tuple[int, ...], float] = {}
    for placement in node.placements():  # type: ignore[attr-defined]
        step = node.step_time(placement, local_bsz)  # type: ignore[attr-defined]
        if step and step > 0:
            table[placement] = sum(placement) * local_bsz / step
    return table
