"""The throughput tensor T[job, gpu_type, config] in samples/s, with the history of every cell.

A job is a (model, global batch size) pair; a config is a placement key such as ``"4"`` or
``"22"``. Cells hold every observation with its source and time rather than one number, because
a throughput measured by a 30-second profiling run, one reported by a job that has run for an
hour and one imported from someone else's cluster deserve different trust, and because the
history is what the UI shows when a user asks "where does this estimate come from".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from heet_tui.profiling.configs import Placement, key_of, normalise

# A cell keeps its latest observations only. Every job of one (model, batch) shares a row and
# a running job reports every few seconds: a lab's months of history would otherwise grow the
# model's memory and every fit's cost without bound, for cells whose value had long settled.
MAX_PER_CELL = 32


class Source(StrEnum):
    PROFILING = "profiling"
    RUNNING = "running"
    IMPORTED = "imported"


# How much one observation of each source counts when cells are averaged in log space: a running
# job's report averages over many steps, a short profiling run over a few, an import comes from
# other hardware of the same name.
SOURCE_WEIGHT = {Source.RUNNING: 2.0, Source.PROFILING: 1.0, Source.IMPORTED: 1.0}


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job as the tensor knows it: a model at a global batch size."""

    model: str
    global_bsz: int

    def __str__(self) -> str:
        return f"{self.model}@{self.global_bsz}"


@dataclass(frozen=True, slots=True)
class Observation:
    samples_per_s: float
    source: Source
    time: float


@dataclass
class ThroughputTensor:
    """Sparse observations on three growing axes; :meth:`arrays` gives the dense view to fit."""

    jobs: list[JobKey] = field(default_factory=list)
    gpu_types: list[str] = field(default_factory=list)
    configs: list[Placement] = field(default_factory=list)
    cells: dict[tuple[int, int, int], list[Observation]] = field(default_factory=dict)

    # -- axes --------------------------------------------------------------------------------
    def job_index(self, job: JobKey, create: bool = True) -> int:
        return _index(self.jobs, job, create)

    def type_index(self, gpu_type: str, create: bool = True) -> int:
        return _index(self.gpu_types, gpu_type, create)

    def config_index(self, placement: Placement | str, create: bool = True) -> int:
        return _index(self.configs, normalise(placement), create)

    def config_keys(self) -> list[str]:
        return [key_of(p) for p in self.configs]

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.jobs), len(self.gpu_types), len(self.configs)

    # -- observations ------------------------------------------------------------------------
    def add(self, job: JobKey, gpu_type: str, placement: Placement | str, samples_per_s: float,
            source: Source | str = Source.PROFILING, time: float = 0.0) -> None:
        """Record one measurement; non-positive or non-finite throughputs are refused."""
        if not (math.isfinite(samples_per_s) and samples_per_s > 0):
            raise ValueError(f"{job} on {gpu_type} {key_of(placement)}: throughput must be positive, "
                             f"got {samples_per_s!r}")
        cell = (self.job_index(job), self.type_index(gpu_type), self.config_index(placement))
        kept = self.cells.setdefault(cell, [])
        kept.append(Observation(float(samples_per_s), Source(source), float(time)))
        if len(kept) > MAX_PER_CELL:
            del kept[:-MAX_PER_CELL]

    def observations(self, job: JobKey, gpu_type: str, placement: Placement | str) -> list[Observation]:
        try:
            cell = (self.jobs.index(job), self.gpu_types.index(gpu_type), self.configs.index(normalise(placement)))
        except ValueError:
            return []
        return list(self.cells.get(cell, []))

    def is_observed(self, j: int, t: int, c: int) -> bool:
        return (j, t, c) in self.cells

    def observed_cells(self) -> Iterable[tuple[int, int, int]]:
        return self.cells.keys()

    def value(self, j: int, t: int, c: int) -> float | None:
        """Weighted geometric mean of a cell's observations (None when it has none)."""
        obs = self.cells.get((j, t, c))
        if not obs:
            return None
        weights = np.array([SOURCE_WEIGHT[o.source] for o in obs])
        logs = np.log([o.samples_per_s for o in obs])
        return float(np.exp(np.dot(weights, logs) / weights.sum()))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(index, log_value)``: observed cells as an (n, 3) int array and their log throughput."""
        keys = sorted(self.cells)
        idx = np.array(keys, dtype=int).reshape(len(keys), 3)
        vals = np.array([math.log(self.value(*k) or 1.0) for k in keys], dtype=float)
        return idx, vals

    def copy(self) -> ThroughputTensor:
        return ThroughputTensor(list(self.jobs), list(self.gpu_types), list(self.configs),
                                {k: list(v) for k, v in self.cells.items()})

    @staticmethod
    def from_dense(jobs: list[JobKey], gpu_types: list[str], configs: list[Placement], values: np.ndarray,
                   source: Source = Source.IMPORTED) -> ThroughputTensor:
        """A tensor holding every finite cell of a dense (jobs, types, configs) array."""
        tensor = ThroughputTensor(list(jobs), list(gpu_types), [normalise(p) for p in configs])
        for j, t, c in zip(*np.nonzero(np.isfinite(values)), strict=True):
            tensor.cells[(int(j), int(t), int(c))] = [Observation(float(values[j, t, c]), source, 0.0)]
        return tensor


def _index(axis: list, item: object, create: bool) -> int:
    try:
        return axis.index(item)
    except ValueError:
        if not create:
            raise KeyError(item) from None
        axis.append(item)
        return len(axis) - 1
