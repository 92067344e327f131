"""A dense ground-truth tensor built from Sia-format profiles, for benchmarks and imports.

Jobs are each model at several realistic global batch sizes. The batch sizes come from the
model's ``validation-<bsz>.csv`` files when present (the sizes the artifact's authors trained
at), else a geometric ladder over what the profiles can serve. A cell is present only where
B / k falls inside (or just outside) the local batch sizes profiled for that placement, which
is where a real job could run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from heet_tui.profiling.configs import Placement
from heet_tui.profiling.sia_format import ModelProfile
from heet_tui.profiling.tensor import JobKey, Source, ThroughputTensor

_VALIDATION = re.compile(r"^validation-(\d+)\.csv\Z")


@dataclass(frozen=True)
class GroundTruth:
    jobs: list[JobKey]
    gpu_types: list[str]
    configs: list[Placement]
    values: np.ndarray  # (jobs, types, configs) samples/s, NaN where not measured

    @property
    def observed(self) -> np.ndarray:
        return np.isfinite(self.values)

    def model_of(self) -> np.ndarray:
        return np.array([j.model for j in self.jobs])

    def to_tensor(self, source: Source = Source.IMPORTED) -> ThroughputTensor:
        """Every measured cell as an observation, e.g. to seed a predictor with imported profiles."""
        return ThroughputTensor.from_dense(self.jobs, self.gpu_types, self.configs, self.values, source)


def batch_sizes_for(model: ModelProfile, folder: Path | None) -> list[int]:
    """Global batch sizes to treat as jobs for one model (see the module docstring)."""
    if folder is not None and folder.is_dir():
        found = sorted({int(m.group(1)) for p in folder.iterdir() if (m := _VALIDATION.match(p.name))})
        if found:
            return found
    lo = min((min(r.local_bsz for r in n.placement_rows + n.scalability_rows)  # type: ignore[operator]
              for n in model.by_type.values()), default=1)
    return [int(lo * 2 ** i) for i in range(1, 7)]


def build_ground_truth(profiles: dict[str, ModelProfile], root: Path | None = None) -> GroundTruth:
    """Every (model, batch) x GPU type x placement cell the profiles can answer."""
    types = sorted({t for m in profiles.values() for t in m.by_type})
    configs: set[Placement] = set()
    for m in profiles.values():
        for node in m.by_type.values():
            configs.update(node.placements())
    config_list = sorted(configs, key=lambda p: (sum(p), len(p), tuple(-c for c in p)))
    jobs: list[JobKey] = []
    rows = []
    for name in sorted(profiles):
        model = profiles[name]
        for bsz in batch_sizes_for(model, root / name if root is not None else None):
            block = np.full((len(types), len(config_list)), np.nan)
            for t, gpu_type in enumerate(types):
                node = model.by_type.get(gpu_type)
                if node is None:
                    continue
                for c, placement in enumerate(config_list):
                    value = node.throughput(placement, bsz)
                    if value is not None and math.isfinite(value) and value > 0:
                        block[t, c] = value
            if np.isfinite(block).sum() >= 2:
                jobs.append(JobKey(name, bsz))
                rows.append(block)
    values = np.stack(rows) if rows else np.zeros((0, len(types), len(config_list)))
    keep = np.isfinite(values).any(axis=(0, 1))
    return GroundTruth(jobs, types, [p for p, k in zip(config_list, keep, strict=True) if k], values[:, :, keep])
