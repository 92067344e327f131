"""Predicted throughput from the project's profiling model (3-D completion, fold-in, sampler).

This is the non-oracle mode the controller would live in: when a job is submitted, the
profiler picks the few short runs that most reduce its uncertainty (``next_to_profile``), those
runs are "measured" (the physics plus seeded noise), and the completion model predicts every
other configuration; each configuration the job then runs on is reported back (online
refinement). Jobs are keyed like the controller keys them, by (model, global batch): a second
job of the same model and batch starts from everything the first one taught the model.

Only raw throughput is predicted; statistical efficiency comes from the job's own gradient
statistics (as in Pollux/AdaptDL), and configurations the job cannot run at all (beyond the
measured GPU counts, or a batch split below what fits) are known to be impossible, as a real
deployment learns from the memory limits a job declares.
"""

from __future__ import annotations

import math
import random

from heet_tui.core.sched_input import ThroughputFn
from heet_tui.profiling.predictor import REFIT_EVERY, ThroughputPredictor
from heet_tui.profiling.tensor import JobKey, Source
from heet_tui.sim.estimates import PROFILING_NOISE, Placement
from heet_tui.sim.feasibility import packed
from heet_tui.sim.state import SimJob

PROFILING_BUDGET = 3
CANDIDATE_COUNTS = (1, 2, 4, 8)


def _raw(job: SimJob, gpu_type: str, placement: Placement) -> float:
    return job.physics.throughput(gpu_type, placement, job.spec.batch_size) / job.slowdown


class ProfiledThroughput:
    def __init__(self, seed: int = 0, host_sizes: dict[str, int] | None = None,
                 noise: float = PROFILING_NOISE, budget: int = PROFILING_BUDGET) -> None:
        self.predictor = ThroughputPredictor()
        self._seed = seed
        self._noise = noise
        self._budget = budget
        self._host_sizes = dict(host_sizes or {})
        self._known: set[tuple[JobKey, str, Placement]] = set()
        self._unfitted = 0
        # Predictions change only when the job's own row gets a measurement or the factors are
        # refitted, so they are cached per (model, batch) until then: many jobs share a key.
        self._cache: dict[JobKey, dict[tuple[str, Placement], float]] = {}
        self.profiling_runs = 0

    @staticmethod
    def key(job: SimJob) -> JobKey:
        return JobKey(job.spec.application, job.spec.batch_size)

    def _record(self, job: SimJob, gpu_type: str, placement: Placement, source: Source, at: float) -> None:
        value = _raw(job, gpu_type, placement)
        if value <= 0:
            return
        if source is Source.PROFILING and self._noise > 0:
            rng = random.Random(f"{self._seed}/{job.id}/{gpu_type}/{placement}")
            value *= math.exp(rng.gauss(0.0, self._noise))
        self.predictor.observe(self.key(job), gpu_type, placement, value, source, at)
        self._known.add((self.key(job), gpu_type, placement))
        self._cache.pop(self.key(job), None)
        self._unfitted += 1

    def prepare(self) -> None:
        """Refit the shared factors if enough has been observed, before the policy runs, so the
        refit is not charged to the policy's scheduling time (the controller refits between rounds)."""
        if self._unfitted >= REFIT_EVERY:
            self.predictor.refit()
            self._unfitted = 0
            self._cache.clear()

    def _candidates(self, job: SimJob) -> list[tuple[str, Placement]]:
        out = []
        for t in job.physics.gpu_types():
            if t not in self._host_sizes:
                continue
            counts = sorted({*CANDIDATE_COUNTS, job.spec.num_replicas})
            for k in counts:
                p = packed(k, self._host_sizes[t])
                if job.physics.rate(t, p, job.spec.batch_size, 0) > 0:
                    out.append((t, p))
        return out

    def admit(self, job: SimJob) -> None:
        key = self.key(job)
        types = [t for t in job.physics.gpu_types() if t in self._host_sizes]
        self.predictor.register(key, types)
        if any(k == key for k, _, _ in self._known):
            return  # this model and batch were profiled before: the tensor already knows them
        candidates = self._candidates(job)
        if not candidates:
            return
        # With nothing measured anywhere yet the model cannot choose; start from the cheapest runs:
        # each type's fewest GPUs the job runs on (gpt_pmp's pipeline needs two or more).
        if not self._known:
            smallest: dict[str, tuple[str, Placement]] = {}
            for t, p in sorted(candidates, key=lambda c: sum(c[1])):
                smallest.setdefault(t, (t, p))
            picks = sorted(smallest.values(), key=lambda c: sum(c[1]))[: self._budget]
        else:
            picks = [(t, _parse(p)) for t, p in self.predictor.next_to_profile(key, candidates, self._budget,
                                                                               seed=self._seed)]
        for t, p in picks:
            self._record(job, t, p, Source.PROFILING, job.spec.time)
            self.profiling_runs += 1

    def observe(self, job: SimJob, gpu_type: str, placement: Placement) -> None:
        if (self.key(job), gpu_type, placement) not in self._known:
            self._record(job, gpu_type, placement, Source.RUNNING, 0.0)

    def view(self, job: SimJob) -> ThroughputFn:
        key = self.key(job)
        predict = self.predictor.throughput_function(key)
        physics, batch = job.physics, job.spec.batch_size

        def goodput(gpu_type: str, placement: Placement) -> float:
            p = tuple(sorted((c for c in placement if c > 0), reverse=True))
            if not p or physics.rate(gpu_type, p, batch, 0) <= 0:
                return 0.0
            cache = self._cache.setdefault(key, {})
            raw = cache.get((gpu_type, p))
            if raw is None:
                raw = cache[(gpu_type, p)] = predict(gpu_type, p)
            return raw * physics.efficiency(gpu_type, p, batch, job.epoch)

        return goodput


def _parse(key: str) -> Placement:
    parts = key.split("-") if "-" in key else list(key)
    return tuple(sorted((int(x) for x in parts), reverse=True))
