"""The profiling service: observations in, predictions with uncertainty out, what to run next.

This is what the controller and the simulator hold. It owns a :class:`ThroughputTensor`, refits
the shared factors when enough new measurements have arrived, and folds each job in on its own
cells (a few profiling runs, then whatever the job reports while running: online refinement),
so predictions improve the moment a measurement arrives without waiting for a refit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from heet_tui.profiling import sampler
from heet_tui.profiling.completion import JOB, FactorModel, FactorSettings, fit
from heet_tui.profiling.configs import (
    FEATURE_NAMES,
    TYPICAL_MULTI_HOST_FACTOR,
    TYPICAL_SCALING_EXPONENT,
    Placement,
    config_features,
    key_of,
    normalise,
)
from heet_tui.profiling.foldin import (
    WELL_OBSERVED,
    Gaussian,
    RowPosterior,
    design_and_offset,
    job_prior,
    posterior,
    unseen_type_var,
)
from heet_tui.profiling.tensor import JobKey, Source, ThroughputTensor

# Refit the shared factors after this many new observations (fold-in covers the time between).
REFIT_EVERY = 25
# Scaling beyond linear is real but rare (a batch split off gradient accumulation, caches): in the
# shared Sia profiles 0.6% of same-type pairs beat linear by more than 25%, none by more than 2.5x.
SUPERLINEAR_SLACK = 1.25


@dataclass(frozen=True, slots=True)
class Prediction:
    samples_per_s: float
    low: float  # about one standard deviation below, in log space
    high: float
    measured: bool


class ThroughputPredictor:
    def __init__(self, tensor: ThroughputTensor | None = None, settings: FactorSettings | None = None) -> None:
        self.tensor = tensor or ThroughputTensor()
        self.settings = settings or FactorSettings()
        self._model: FactorModel | None = None
        self._since_fit = 0
        self._rows: dict[int, RowPosterior] = {}
        self._coverage: tuple[dict[int, int], set[tuple[int, int]]] | None = None  # cells per type; (job, type)s
        self._measured: dict[int, list[tuple[int, int, float]]] = {}  # per job: (type, GPUs, value) measured

    # -- input -------------------------------------------------------------------------------
    def observe(self, job: JobKey, gpu_type: str, placement: Placement | str, samples_per_s: float,
                source: Source | str = Source.RUNNING, time: float = 0.0) -> None:
        """Add a measurement (profiling run, running job or import); predictions update at once."""
        self.tensor.add(job, gpu_type, placement, samples_per_s, source, time)
        self._since_fit += 1
        self._rows.pop(self.tensor.job_index(job), None)
        self._measured.pop(self.tensor.job_index(job), None)
        self._coverage = None

    def register(self, job: JobKey, gpu_types: Sequence[str] = (), placements: Sequence[Placement | str] = ()) -> None:
        """Make a job, types and configs known before anything is measured for them."""
        self.tensor.job_index(job)
        for t in gpu_types:
            self.tensor.type_index(t)
        for p in placements:
            self.tensor.config_index(p)

    # -- model -------------------------------------------------------------------------------
    def refit(self, seed: int | None = None) -> FactorModel:
        idx, y = self.tensor.arrays()
        if len(y) == 0:
            raise ValueError("no measurements yet: nothing to predict from")
        settings = self.settings if seed is None else replace(self.settings, seed=seed)
        counts = np.bincount(idx[:, 0], minlength=len(self.tensor.jobs))
        well = counts[idx[:, 0]] >= WELL_OBSERVED
        train = idx[well] if well.sum() >= 10 else idx
        ytrain = y[well] if well.sum() >= 10 else y
        self._model = fit(train, ytrain, self.tensor.shape, config_features(self.tensor.configs),
                          _log_bsz(self.tensor), settings)
        self._since_fit = 0
        self._rows.clear()
        return self._model

    def _current(self) -> FactorModel:
        if self._model is None or self._since_fit >= REFIT_EVERY:
            return self.refit()
        model = self._model
        nj, nt, nc = self.tensor.shape
        if model.jobs.shape[0] < nj or model.types.shape[0] < nt or model.configs.shape[0] < nc:
            model = _grown(model, self.tensor)
            self._model = model
            self._rows.clear()
        return model

    def _prior(self, model: FactorModel, j: int) -> Gaussian:
        counts = np.zeros(len(self.tensor.jobs), dtype=int)
        for cj, _, _ in self.tensor.observed_cells():
            counts[cj] += 1
        well = np.flatnonzero(counts >= WELL_OBSERVED)
        well = well[well != j]
        if len(well) == 0:  # nothing to learn from yet: a vague prior around a typical scaling law
            return Gaussian(cold_start_mean(model.layout.job_dim), np.eye(model.layout.job_dim))
        job = self.tensor.jobs[j]
        families = np.array([self.tensor.jobs[k].model for k in well])
        log_bsz = np.log([self.tensor.jobs[k].global_bsz for k in well])
        return job_prior(model.jobs[well], families, log_bsz, job.model, math.log(job.global_bsz))

    def job_belief(self, job: JobKey) -> RowPosterior:
        j = self.tensor.job_index(job)
        model = self._current()
        if j in self._rows:
            return self._rows[j]
        cells = [(t, c) for (cj, t, c) in self.tensor.observed_cells() if cj == j]
        a = np.array([t for t, _ in cells], dtype=int)
        c = np.array([c for _, c in cells], dtype=int)
        y = np.array([math.log(self.tensor.value(j, t, cc) or 1.0) for t, cc in cells])
        belief = posterior(model, JOB, j, self._prior(model, j), a, c, y)
        self._rows[j] = belief
        return belief

    # -- output ------------------------------------------------------------------------------
    def predict(self, job: JobKey, gpu_type: str, placement: Placement | str) -> Prediction:
        t = self.tensor.type_index(gpu_type)
        c = self.tensor.config_index(placement)
        j = self.tensor.job_index(job)
        belief = self.job_belief(job)
        measured = self.tensor.value(j, t, c)
        mean, var = belief.predict_log(np.array([t]), np.array([c]))
        per_type, pairs = self._type_coverage()
        sd = float(math.sqrt(var[0] + (0.0 if (j, t) in pairs else unseen_type_var(per_type.get(t, 0)))))
        if measured is not None:
            sd = math.sqrt(belief.model.noise_var)
            return Prediction(measured, measured * math.exp(-sd), measured * math.exp(sd), True)
        value = min(math.exp(float(mean[0])), self._linear_cap(j, t, c))
        return Prediction(value, value * math.exp(-sd), value * math.exp(sd), False)

    def _linear_cap(self, j: int, t: int, c: int) -> float:
        """The most ``c`` can give while the job is measured at one size only: about linear scaling
        from its measurements on the type on fewer GPUs. A new job with one measured GPU was
        predicted 4x on two GPUs and 9x on four (the factors of unlike jobs), and plans gave it
        GPUs for speed-ups no training loop has."""
        if j not in self._measured:
            self._measured[j] = [(ct, sum(self.tensor.configs[cc]), value) for cj, ct, cc in self.tensor.observed_cells()
                                 if cj == j and (value := self.tensor.value(cj, ct, cc)) is not None]
        measured = self._measured[j]
        if len({n for _, n, _ in measured}) > 1:
            return math.inf  # measured at two sizes: the job's own scaling is evidence, superlinear or not
        gpus = sum(self.tensor.configs[c])
        return min((value * gpus / n * SUPERLINEAR_SLACK for ct, n, value in measured if ct == t and n < gpus),
                   default=math.inf)

    def _type_coverage(self) -> tuple[dict[int, int], set[tuple[int, int]]]:
        if self._coverage is None:
            per_type: dict[int, int] = {}
            pairs = set()
            for j, t, _ in self.tensor.observed_cells():
                per_type[t] = per_type.get(t, 0) + 1
                pairs.add((j, t))
            self._coverage = (per_type, pairs)
        return self._coverage

    def next_to_profile(self, job: JobKey, candidates: Sequence[tuple[str, Placement | str]],
                        budget: int = sampler.DEFAULT_BUDGET, seed: int = 0) -> list[tuple[str, str]]:
        """Up to ``budget`` (gpu_type, placement key) runs that most reduce this job's uncertainty.

        Candidates already measured for the job are never proposed.
        """
        cells = [(self.tensor.type_index(t), self.tensor.config_index(p)) for t, p in candidates]
        belief = self.job_belief(job)
        j = self.tensor.job_index(job)
        model = belief.model
        a = np.array([t for t, _ in cells], dtype=int)
        c = np.array([c for _, c in cells], dtype=int)
        design, _ = design_and_offset(model, JOB, j, a, c)
        measured = [i for i, (t, cc) in enumerate(cells) if self.tensor.is_observed(j, t, cc)]
        first = None
        if not any(cj == j for cj, _, _ in self.tensor.observed_cells()):
            placements = [self.tensor.configs[cc] for _, cc in cells]
            first = sampler.cheapest(np.array([sum(p) for p in placements]), np.array([len(p) for p in placements]))
        picks = sampler.choose_for([sampler.Belief(belief.belief.cov, design, model.noise_var)], budget, measured,
                                   seed, first=first)
        return [(self.tensor.gpu_types[cells[i][0]], key_of(self.tensor.configs[cells[i][1]])) for i in picks]

    def throughput_function(self, job: JobKey, local_bsz_limits: Mapping[str, tuple[float, float]] | None = None
                            ) -> Callable[[str, tuple[int, ...]], float]:
        """The scheduler's ``(gpu_type, placement) -> samples/s`` for one job (0 = cannot run).

        A GPU type never seen anywhere gives 0; ``local_bsz_limits`` (per type, the smallest and
        largest local batch that fits) marks configurations that split the batch too far or too
        little as impossible.
        """
        cache: dict[tuple[str, tuple[int, ...]], float] = {}

        def throughput(gpu_type: str, placement: tuple[int, ...]) -> float:
            key = (gpu_type, tuple(placement))
            if key not in cache:
                cache[key] = self._value_or_zero(job, gpu_type, placement, local_bsz_limits)
            return cache[key]

        return throughput

    def _value_or_zero(self, job: JobKey, gpu_type: str, placement: tuple[int, ...],
                       limits: Mapping[str, tuple[float, float]] | None) -> float:
        try:
            p = normalise(placement)
        except ValueError:
            return 0.0
        if gpu_type not in self.tensor.gpu_types:
            return 0.0
        if limits is not None and gpu_type in limits:
            lo, hi = limits[gpu_type]
            if not lo <= job.global_bsz / sum(p) <= hi:
                return 0.0
        return self.predict(job, gpu_type, p).samples_per_s


def _grown(model: FactorModel, tensor: ThroughputTensor) -> FactorModel:
    """The model padded with neutral rows for jobs, types and configs added since the fit.

    A new type starts as the average of the known types; a new config relies on its features.
    """
    nj, nt, nc = tensor.shape

    def pad(rows: np.ndarray, n: int, fill: np.ndarray | None = None) -> np.ndarray:
        if rows.shape[0] >= n:
            return rows
        extra = np.zeros((n - rows.shape[0], rows.shape[1])) if fill is None else np.tile(fill, (n - rows.shape[0], 1))
        return np.vstack([rows, extra])

    type_mean = model.types.mean(axis=0) if len(model.types) else None
    return replace(model, jobs=pad(model.jobs, nj), types=pad(model.types, nt, type_mean),
                   configs=pad(model.configs, nc), phi=config_features(tensor.configs), log_bsz=_log_bsz(tensor))


def cold_start_mean(job_dim: int) -> np.ndarray:
    """A job row's prior mean while no job is well observed: the typical scaling law (configs.py).

    With a zero mean, a first job's three one-GPU profiling runs said that 16 GPUs are as fast as
    one: on the demo cluster its median error was 0.70, 0.05 with the law. Later jobs start from
    the rows of jobs already well observed, so only the cold start uses it.
    """
    mean = np.zeros(job_dim)
    mean[1 + FEATURE_NAMES.index("log_gpus")] = TYPICAL_SCALING_EXPONENT  # column 0 is the job's bias
    mean[1 + FEATURE_NAMES.index("multi_host")] = math.log(TYPICAL_MULTI_HOST_FACTOR)
    return mean


def _log_bsz(tensor: ThroughputTensor) -> np.ndarray:
    return np.log([max(j.global_bsz, 1) for j in tensor.jobs])
