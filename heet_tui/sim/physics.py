"""Job physics: how fast a job progresses on a given GPU type, placement and batch size.

A job's progress is counted the way the Pollux/Sia simulators count it, in *iterations at the
model's smallest validated batch size* ``B0``. One iteration at global batch ``B`` is worth
``gain(B, epoch)`` of those (the gradient-noise-scale gain), and takes
``step + accum * (step - sync)`` seconds, where ``step``/``sync`` come from the measured
profiles at the per-GPU (atomic) batch and ``accum`` counts extra gradient-accumulation
micro-steps needed when the local batch exceeds what was measured (the memory limit).
A job is done when its progress reaches the progress of its target epoch.

``goodput`` expresses the same rate in samples/s at ``B0``'s statistical efficiency, which is
what policies see: it equals raw throughput times efficiency (``gain / (B / B0)`` <= 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from heet_tui.profiling.sia_format import ProfileFormatError, node_types_in, read_model, read_profiles
from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.errors import SimInputError
from heet_tui.sim.model_table import constants_for
from heet_tui.sim.step_table import Placement, StepTable
from heet_tui.sim.validation_data import ValidationTable, read_validation


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """How a global batch is split: ``atomic`` samples per GPU per micro-step, ``accum`` extra
    micro-steps per iteration."""

    atomic: int
    accum: int

    def global_batch(self, gpus: int) -> int:
        return gpus * self.atomic * (self.accum + 1)


class ModelPhysics:
    """Everything the simulator knows about one model (application)."""

    def __init__(self, model: str, tables: Mapping[str, StepTable], validation: ValidationTable,
                 target_epochs: int, restart_s: float, one_gpu_accumulates: bool = False) -> None:
        self.model = model
        # Sia's simulator makes a 1-GPU job whose batch exceeds B0 accumulate over >= 2
        # micro-steps; only the reference-compatibility mode turns this on.
        self.one_gpu_accumulates = one_gpu_accumulates
        self.tables = dict(tables)
        self.validation = validation
        self.target_epochs = target_epochs
        self.restart_s = restart_s
        self.target_progress = validation.progress_at(target_epochs)
        self.rate = lru_cache(maxsize=262144)(self._rate)
        self.batch_config = lru_cache(maxsize=65536)(self._batch_config)
        self.efficiency = lru_cache(maxsize=262144)(self._efficiency)
        self._gain_weighted_suffix = lru_cache(maxsize=256)(self._gain_weighted_suffix_uncached)

    @property
    def init_batch_size(self) -> int:
        return self.validation.init_batch_size

    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted(self.tables))

    def max_gpus(self, gpu_type: str) -> int:
        """Largest GPU count measured for this model on this type (0 if never measured)."""
        table = self.tables.get(gpu_type)
        return table.max_gpus if table else 0

    def epoch_of(self, progress: float) -> int:
        """The epoch a job with this much progress is in (0-based)."""
        v = self.validation
        e = 0
        while e < self.target_epochs - 1 and progress >= v.progress_at(e + 1):
            e += 1
        return e

    def gain_weighted_work_from(self, batch_size: int, epoch: int) -> float:
        """Progress of the whole epochs ``epoch``..target over their statistical gain: training
        time at unit speed. O(1) per call (a cached suffix sum per batch size)."""
        suffix = self._gain_weighted_suffix(batch_size)
        return suffix[epoch] if 0 <= epoch < len(suffix) else 0.0

    def _gain_weighted_suffix_uncached(self, batch_size: int) -> tuple[float, ...]:
        v, total = self.validation, 0.0
        out = [0.0] * self.target_epochs
        for epoch in range(self.target_epochs - 1, -1, -1):
            gain = v.gain(batch_size, epoch)
            work = v.progress_at(epoch + 1) - v.progress_at(epoch)
            total += work / gain if gain > 0 else math.inf
            out[epoch] = total
        return tuple(out)

    def _batch_config(self, gpu_type: str, placement: Placement, batch_size: int) -> BatchConfig | None:
        table = self.tables.get(gpu_type)
        gpus = sum(placement)
        if table is None or gpus <= 0:
            return None
        max_local = table.max_local_bsz(placement)
        if max_local <= 0:
            return None
        # A batch above any validated one trains at the largest, as the workload note says: capped
        # only per micro-step, 1e6 over 4 GPUs ran as 977 micro-steps of 1 each (6.6 h for 0.5 h)
        batch_size = min(batch_size, int(self.validation.max_batch_size))
        local = math.ceil(batch_size / gpus - 1e-8)
        accum = max(math.ceil(local / max_local - 1e-8) - 1, 0)
        if self.one_gpu_accumulates and gpus == 1 and batch_size > self.init_batch_size:
            accum = max(accum, 1)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        # Never train with a larger batch than any validated run: efficiency there is unknown.
        atomic = min(atomic, int(self.validation.max_batch_size // (gpus * (accum + 1))))
        if atomic <= 0:
            return None
        return BatchConfig(atomic, accum)

    def iteration_s(self, gpu_type: str, placement: Placement, cfg: BatchConfig) -> float | None:
        step_sync = self.tables[gpu_type].lookup(placement, float(cfg.atomic))
        if step_sync is None:
            return None
        step, sync = step_sync
        total = step + cfg.accum * max(step - sync, 0.0)
        return total if total > 0 else None

    def _rate(self, gpu_type: str, placement: Placement, batch_size: int, epoch: int) -> float:
        """Progress units per second; 0 when the configuration cannot run."""
        cfg = self.batch_config(gpu_type, placement, batch_size)
        if cfg is None:
            return 0.0
        seconds = self.iteration_s(gpu_type, placement, cfg)
        if seconds is None:
            return 0.0
        return self.validation.gain(cfg.global_batch(sum(placement)), epoch) / seconds

    def _efficiency(self, gpu_type: str, placement: Placement, batch_size: int, epoch: int) -> float:
        """Goodput / raw throughput (``gain / (B / B0)``) at the batch this configuration trains with."""
        cfg = self.batch_config(gpu_type, placement, batch_size)
        if cfg is None:
            return 0.0
        return self.efficiency_at(cfg.global_batch(sum(placement)), epoch)

    def efficiency_at(self, batch: int, epoch: int) -> float:
        """Goodput / raw throughput of training at global ``batch`` in ``epoch``: ``gain / (B / B0)``."""
        return self.validation.gain(batch, epoch) / (batch / self.init_batch_size) if batch > 0 else 0.0

    def goodput(self, gpu_type: str, placement: Placement, batch_size: int, epoch: int) -> float:
        """Useful samples/s (raw throughput x statistical efficiency)."""
        return self.rate(gpu_type, placement, batch_size, epoch) * self.init_batch_size

    def throughput(self, gpu_type: str, placement: Placement, batch_size: int) -> float:
        """Raw samples/s, what a training script would report."""
        cfg = self.batch_config(gpu_type, placement, batch_size)
        if cfg is None:
            return 0.0
        seconds = self.iteration_s(gpu_type, placement, cfg)
        return cfg.global_batch(sum(placement)) / seconds if seconds else 0.0


@dataclass(frozen=True)
class Physics:
    """All models of a profile directory, restricted to the cluster's GPU types."""

    models: Mapping[str, ModelPhysics]
    root: str = ""
    available: tuple[str, ...] = ()  # every model folder under root, loaded or not

    def get(self, model: str) -> ModelPhysics:
        try:
            return self.models[model]
        except KeyError:
            raise KeyError(model) from None


def load_physics(root: Path | str, cluster: SimCluster | Mapping[str, str],
                 models: Iterable[str] | None = None, one_gpu_accumulates: bool = False) -> Physics:
    """Read profiles for the node types of ``cluster`` (or of a mapping: profile suffix -> GPU type).

    Raises :class:`SimInputError` when a node type has no profile for any model read (a typo in
    the cluster file, or the wrong directory) or when a model has no validation data. Given a
    :class:`SimCluster`, that error names its file and the node type.
    """
    root = Path(root)
    if not root.is_dir():
        raise SimInputError(f"{root}: not a directory of profiles")
    profile_map = cluster.profile_map() if isinstance(cluster, SimCluster) else dict(cluster)
    available = tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("placements-*.csv"))))
    wanted = sorted(set(models)) if models is not None else None
    _require_node_profiles(root, cluster, wanted)
    try:
        if wanted is not None and available:
            # Only the workload's models: parsing every profile of a big directory is most of the start-up.
            profiles = {n: read_model(root / n, profile_map, label_prefix=f"{n}/") for n in wanted
                        if n in available}
            # one profiled on none of the cluster's types is kept: its jobs end "unschedulable" (it
            # was an "unknown application" that refused the run, beside a list naming it)
        else:
            profiles = read_profiles(root, profile_map)
    except ProfileFormatError as exc:
        raise SimInputError(str(exc)) from None
    out: dict[str, ModelPhysics] = {}
    for name, model in sorted(profiles.items()):
        folder = root / name if (root / name).is_dir() else root
        validation = read_validation(folder, label_prefix=f"{root}/{name}/")
        if validation is None:
            raise SimInputError(f"{folder}: model {name!r} has no validation-<batch>.csv files "
                                f"(statistical efficiency and the target are read from them)")
        consts = constants_for(name)
        target = min(consts.target_epochs or validation.epochs, validation.epochs)
        tables = {gpu: StepTable(node) for gpu, node in model.by_type.items()}
        out[name] = ModelPhysics(name, tables, validation, target, consts.restart_s, one_gpu_accumulates)
    return Physics(out, str(root), available or tuple(sorted(out)))


def _require_node_profiles(root: Path, cluster: SimCluster | Mapping[str, str], wanted: list[str] | None) -> None:
    """Refuse a node type whose profile suffix has no files for any model of the directory (a
    typo in the cluster file, or the wrong directory).

    Checked against the files, before parsing: a node type the reader finds nothing for is
    skipped silently, and when it was the only one every model came back empty and the run
    blamed the first workload row for an "unknown application". Models the directory lacks are
    left to that error, which is then the right one. A node type the workload's own models have
    no profile for is no error: they do not run there (a gpt_pmp-only workload was refused on the
    reference cluster, whose T4 nodes the profiles measure for other models).
    """
    if node_types_in(root):  # root is a single model's folder
        folders = [root] if wanted is None or root.name in wanted else []
    else:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and node_types_in(p))
        if wanted is not None and not any(p.name in wanted for p in folders):
            return
    if not folders:
        return
    found = sorted({node for folder in folders for node in node_types_in(folder)})
    which = "any model"
    for suffix, gpu_type in (cluster.profile_map() if isinstance(cluster, SimCluster) else cluster).items():
        if suffix in found:
            continue
        files = f"no placements-{suffix}.csv or scalability-{suffix}.csv"
        if not isinstance(cluster, SimCluster):
            raise SimInputError(f"{root}: {files} for {which} (profile for GPU type {gpu_type!r} missing; "
                                f"node types profiled there: {', '.join(found)})")
        node = next(t for t in cluster.node_types if t.profile == suffix)
        raise SimInputError(f"{cluster.source or f'cluster {cluster.name!r}'}: node type {node.name!r} "
                            f"(GPU type {gpu_type!r}): {root} has {files} for {which} (it has node types "
                            f"{', '.join(found)}; a node type's `profile` names one of them)")
