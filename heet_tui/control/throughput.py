"""Throughput estimates the controller hands the policy, built from what jobs really measured.

Each job's measured cells (GPU type x placement, samples/s from profiling runs and from the
running job's own progress reports) are used as they are. For a placement nobody measured the
estimate starts from the nearest measured count on that type and scales it sub-linearly
(the job's own exponent where it ran at several counts on some type, else the mean of the other
classes' exponents with ``profiling.configs.TYPICAL_SCALING_EXPONENT`` counted as one more), with a penalty for spanning hosts, because
data-parallel speed-up is never linear and crossing hosts costs bandwidth. A type with no measurement for the job gets
the job's best measured type scaled by how the two types compare on jobs that ran on both;
with nothing to compare, the type is left out (throughput 0) until it is profiled.

Every measurement also goes to the profiling model (``heet_tui.profiling.predictor``, 3-D
collaborative filtering over job x GPU type x placement). Once that model has at least one
well-observed job to learn the shared factors from (for instance imported profiles, or jobs
that have run in many configurations), its predictions replace the scaling rule for the cells
nobody measured; until then a fit on a handful of cells would be guesswork, so the rule stays.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from heet_tui.control.scaling_rule import own_scaling_exponent, parse_placement, scaled
from heet_tui.core.allocation import placement_key
from heet_tui.core.sched_input import ThroughputFn
from heet_tui.profiling.configs import TYPICAL_SCALING_EXPONENT

FAR_APART = math.log(10)  # two classes' type ratios this far apart: at least one of them is not to be believed
RECENT = 5  # a cell's value is the mean of its last few observations: jobs warm up, hosts get busy
UNLIKE_TWINS = 1.5  # twins measured this far apart are probably not twins (busy hosts vary by 1.3x)
# Twins are compared on what they measured while running within this window of each other: a
# sweep on emulated GPUs compared running twins (five trainings sharing the CPU) with the leader's
# profiling runs (two), and warned that 0.37x was "probably another model".
TWIN_WINDOW_S = 60.0
# A twin's numbers for a cell count in the class's value only while they are this close to the
# class's newest there: a sweep's first job, measured alone on an idle host hours ago (1,063/s),
# held its finished numbers equal with the running twin's 115/s, and the plan counted on 589.
FRESH_S = 1800.0
PRIOR_CLASSES = 1  # the typical scaling law counts as this many measured classes (others_exponent)


ProfileClass = tuple[str, int]  # (model, global batch): the job spec's profile class


@dataclass
class ThroughputBook:
    """Every measurement, by job, GPU type and placement key (and the profiling model fed with them).

    Jobs of one profile class (the spec's ``model`` and ``batch_size``) run the same steps, so
    they share their measurements: a cell's value is the mean over the class's jobs of each
    one's recent mean (of those that measured it lately: see ``FRESH_S``). Kept per job, the
    measurements of a sweep's identical jobs differed by the noise of the moment each was taken
    (a busy host, a profiling run beside it), and a plan preempted a job a tenth done for its
    twin that had not started, because the twin's number was higher. Pooled, twins compare by
    their remaining work alone, and a new job whose class has run is measured already.
    """

    cells: dict[str, dict[tuple[str, str], list[float]]] = field(default_factory=lambda: defaultdict(dict))
    predictor: object | None = None  # heet_tui.profiling.predictor.ThroughputPredictor
    keys: dict[str, object] = field(default_factory=dict)  # job id -> the predictor's JobKey
    model_ready: bool = False  # the profiling model has a well-observed job to learn from
    # a type no class was measured on beside the job's: guessed as fast as where the job was
    # measured, else (profiling on) left at 0 until a side run measures it
    guess_unrelated: bool = False
    # jobs no (one-GPU) profiling run can measure: guessed so too (one waited for good beside idle T4s)
    unprofiled: set[str] = field(default_factory=set)
    classes: dict[str, ProfileClass] = field(default_factory=dict)
    _members: dict[ProfileClass, set[str]] = field(default_factory=dict)
    _pooled: dict[ProfileClass, dict[tuple[str, str], float]] = field(default_factory=dict)
    # when each job last measured each cell: what decides whose numbers are fresh for the class
    _latest: dict[str, dict[tuple[str, str], float]] = field(default_factory=lambda: defaultdict(dict))
    # running jobs' own reports, (when, samples/s) by job and cell: what twins are compared on
    _running: dict[str, dict[tuple[str, str], list[tuple[float, float]]]] = field(
        default_factory=lambda: defaultdict(dict))
    _version: int = 0  # counts changes to the cells: what ``others_exponent`` was worked out for
    _exponent: tuple[int, float] | None = None

    def register(self, job_id: str, model: str, global_batch: int, min_gpus: int = 1) -> None:
        """Say which profile class a job is; jobs that share one share their measurements (and a row
        of the profiling model)."""
        (self.unprofiled.add if min_gpus > 1 else self.unprofiled.discard)(job_id)
        if job_id not in self.classes:
            cls = (model, int(global_batch))
            self.classes[job_id] = cls
            self._members.setdefault(cls, set()).add(job_id)
            self._pooled.pop(cls, None)
            self._version += 1
        if self.predictor is not None and job_id not in self.keys:
            from heet_tui.profiling.tensor import JobKey

            self.keys[job_id] = JobKey(model, global_batch)

    def add(self, job_id: str, gpu_type: str, placement: tuple[int, ...] | str, samples_per_s: float,
            source: str = "running", at: float = 0.0) -> None:
        if not (samples_per_s > 0 and math.isfinite(samples_per_s)):
            return
        key = placement if isinstance(placement, str) else placement_key(placement)
        kept = self.cells[job_id].setdefault((gpu_type, key), [])
        kept.append(samples_per_s)
        del kept[:-RECENT]
        latest = self._latest[job_id]
        latest[(gpu_type, key)] = max(at, latest.get((gpu_type, key), at))
        if source == "running":
            dated = self._running[job_id].setdefault((gpu_type, key), [])
            dated.append((at, samples_per_s))
            del dated[:-RECENT]
        self._pooled.pop(self.classes.get(job_id), None)  # type: ignore[arg-type]
        self._version += 1
        if self.predictor is not None and job_id in self.keys:
            try:
                self.predictor.observe(self.keys[job_id], gpu_type, key, samples_per_s, source, at)
            except ValueError:
                return  # the model refuses what it cannot use; the book keeps it
            self.model_ready = self.model_ready or self._well_observed()

    def load(self, rows: Iterable[tuple[str, str, str, float, float, str]]) -> None:
        for job_id, gpu_type, key, sps, at, source in rows:
            self.add(job_id, gpu_type, key, sps, source, at)

    def reload(self, rows: Iterable[tuple[str, str, str, float, float, str]]) -> None:
        """Start again from ``rows`` (after some were forgotten), keeping who is in which class."""
        self.cells.clear()
        self._latest.clear()
        self._running.clear()
        self._pooled.clear()
        self._version += 1
        if self.predictor is not None:
            self.predictor, self.keys, self.model_ready = profiling_model(), {}, False
            for job_id, (model, batch) in self.classes.items():
                self.register(job_id, model, batch)
        self.load(rows)

    def _well_observed(self) -> bool:
        from heet_tui.profiling.predictor import WELL_OBSERVED

        counts: dict[int, int] = {}
        for j, _t, _c in self.predictor.tensor.observed_cells():
            counts[j] = counts.get(j, 0) + 1
        return any(n >= WELL_OBSERVED for n in counts.values())

    def _predicted(self, job_id: str, gpu_type: str, placement: tuple[int, ...]) -> tuple[float, float] | None:
        """The completion model's samples/s and its relative spread (one standard deviation)."""
        if job_id not in self.keys or not self.model_ready:
            return None
        if gpu_type not in self.predictor.tensor.gpu_types:
            return None
        try:
            p = self.predictor.predict(self.keys[job_id], gpu_type, placement)
            value = float(p.samples_per_s)
            spread = math.sqrt(p.high / p.low) - 1 if p.low > 0 and p.high >= p.low else None
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            return None
        if not (value > 0 and math.isfinite(value)) or spread is None or not math.isfinite(spread):
            return None
        return value, spread

    def running_mean(self, job_id: str, gpu_type: str, key: str, since: float) -> float | None:
        """The mean of what the job's running processes reported on this cell from ``since`` (its
        recent few), or None: what it runs at now, without the profiling runs in the cell's mean."""
        found = [v for at, v in self._running.get(job_id, {}).get((gpu_type, key), ()) if at >= since]
        return sum(found) / len(found) if found else None

    def own(self, job_id: str) -> dict[tuple[str, str], float]:
        """What this job itself measured: each cell's recent mean."""
        return {k: sum(v[-RECENT:]) / len(v[-RECENT:]) for k, v in self.cells.get(job_id, {}).items()}

    def measured(self, job_id: str) -> dict[tuple[str, str], float]:
        """The job's cells, pooled over its profile class: the mean of the twins' recent means,
        over the twins that measured the cell within ``FRESH_S`` of the newest of them."""
        cls = self.classes.get(job_id)
        if cls is None:
            return self.own(job_id)
        pooled = self._pooled.get(cls)
        if pooled is None:
            values: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for member in sorted(self._members[cls]):
                latest = self._latest.get(member, {})
                for key, value in self.own(member).items():
                    values.setdefault(key, []).append((latest.get(key, 0.0), value))
            pooled = self._pooled[cls] = _pooled_cells(values)
        return dict(pooled)

    def unlike_twins(self, job_id: str, gpu_type: str, key: str, now: float) -> float | None:
        """The job's running speed on a cell over its twins' there, when it has settled
        (``RECENT`` reports), they ran there within ``TWIN_WINDOW_S`` of ``now``, and the two
        differ by more than ``UNLIKE_TWINS``: a sign that the spec's ``model`` names two
        different jobs, whose pooled numbers are then wrong for both."""
        cell = (gpu_type, key)
        own = [v for _, v in self._running.get(job_id, {}).get(cell, [])]
        mates = []
        for mate in sorted(self.class_mates(job_id)):
            recent = [v for at, v in self._running.get(mate, {}).get(cell, []) if at >= now - TWIN_WINDOW_S]
            if recent:
                mates.append(sum(recent) / len(recent))
        if len(own) < RECENT or not mates:
            return None
        ratio = (sum(own) / len(own)) / (sum(mates) / len(mates))
        return ratio if max(ratio, 1 / ratio) > UNLIKE_TWINS else None

    def class_mates(self, job_id: str) -> set[str]:
        cls = self.classes.get(job_id)
        return self._members.get(cls, {job_id}) - {job_id} if cls else set()

    def measured_types(self, job_id: str) -> set[str]:
        return {t for t, _ in self.measured(job_id)}

    def _one_per_class(self) -> list[dict[tuple[str, str], float]]:
        """Measured cells once per profile class (jobs never registered are a class each): a
        comparison of types counts a sweep of twenty twins once, not twenty times."""
        seen: set[ProfileClass] = set()
        out = []
        for job_id in self.cells:
            cls = self.classes.get(job_id)
            if cls is not None:
                if cls in seen:
                    continue
                seen.add(cls)
            out.append(self.measured(job_id))
        return out

    def type_ratio(self, a: str, b: str) -> float | None:
        """Speed of type ``a`` relative to ``b``: the median over job classes measured on both (at one
        GPU, else at the placements both have; in log space; of two, their geometric mean). A mean
        let one absurd report (5e8/s on a T4) make every new job's T4 guess 8.7x its A100 figure;
        one GPU alone left a cluster of multi-GPU jobs, never profiled, without any ratio."""
        logs = []
        for m in self._one_per_class():
            if (a, "1") in m and (b, "1") in m:
                logs.append(math.log(m[(a, "1")] / m[(b, "1")]))
            elif both := [math.log(m[(a, k)] / v) for (t, k), v in m.items() if t == b and (a, k) in m and v > 0
                          and m[(a, k)] > 0]:
                logs.append(statistics.median(both))
        if len(logs) == 2 and abs(logs[0] - logs[1]) > FAR_APART:
            # the median of two is their mean: one class 1e7x apart still decided it (a lab with two
            # models); the one nearer "as fast" is the safer guess until a third class settles it
            return math.exp(min(logs, key=abs))
        return math.exp(statistics.median(logs)) if logs else None

    def estimate(self, job_id: str, gpu_type: str, placement: tuple[int, ...]) -> float:
        return self.estimate_with_spread(job_id, gpu_type, placement)[0]

    def estimate_with_spread(self, job_id: str, gpu_type: str, placement: tuple[int, ...]) -> tuple[float, float | None]:
        """samples/s and how far off it may be, relative: 0 for a measured cell, the completion
        model's spread for its prediction, None for a scaling-law guess (no model to say). The
        Profiles screen showed every prediction as ±30%, whatever the model knew."""
        if not placement or sum(placement) <= 0:
            return 0.0, None
        m = self.measured(job_id)
        key = placement_key(placement)
        if (gpu_type, key) in m:
            return m[(gpu_type, key)], 0.0
        predicted = self._predicted(job_id, gpu_type, placement)
        if predicted is not None:
            return predicted
        return self._guessed(job_id, gpu_type, placement, m), None

    def others_exponent(self) -> float:
        """How speed grew with GPUs for the classes that ran at several counts here, averaged with
        the typical law counted as one class more: a job that ran only on one GPU was guessed at
        1.8x on two whatever the cluster showed (three classes measured there at 0.6-1.5x, and plans
        grew jobs that then ran slower than on one GPU)."""
        if self._exponent is None or self._exponent[0] != self._version:
            found = [e for m in self._one_per_class()
                     if (e := own_scaling_exponent(m, otherwise=math.nan)) == e]  # nan: not measured at two
            mean = (sum(found) + TYPICAL_SCALING_EXPONENT * PRIOR_CLASSES) / (len(found) + PRIOR_CLASSES)
            self._exponent = (self._version, mean)
        return self._exponent[1]

    def _guessed(self, job_id: str, gpu_type: str, placement: tuple[int, ...],
                 m: dict[tuple[str, str], float]) -> float:
        exponent = own_scaling_exponent(m, otherwise=self.others_exponent())
        own = {parse_placement(k): v for (t, k), v in m.items() if t == gpu_type}
        if own:
            return scaled(own, placement, exponent)
        # every measured type's route, averaged (geometric): the best of them was taken, and one
        # inflated ratio put a T4 above the job's own A100 figure, and the plan waited for T4s
        routes, unrelated = [], []
        for other in self.measured_types(job_id):
            ratio = self.type_ratio(gpu_type, other)
            base = {parse_placement(k): v for (t, k), v in m.items() if t == other}
            if (value := scaled(base, placement, exponent) * (ratio or 1.0)) > 0:
                (routes if ratio is not None else unrelated).append(value)
        # no class measured on both types: as fast as where it was measured, a rough guess (as the
        # nominal function's), where no profiling run will measure it (--no-profile): at 0, a job
        # restricted to a type no class had run on sat queued beside its idle GPUs for good
        routes = routes or (unrelated if self.guess_unrelated or job_id in self.unprofiled else [])
        return math.exp(sum(math.log(v) for v in routes) / len(routes)) if routes else 0.0

    def function(self, job_id: str) -> ThroughputFn:
        def throughput(gpu_type: str, placement: tuple[int, ...]) -> float:
            return self.estimate(job_id, gpu_type, tuple(placement))

        return throughput

    def nominal_function(self) -> ThroughputFn:
        """Throughput in relative units for a job nothing was measured of (``control/unmeasured.py``).

        One GPU of a type is worth that type's speed relative to the type most jobs were
        measured on (geometric mean over jobs measured on both; 1 where no job compares them),
        scaled by the typical law for more GPUs and hosts. Only ratios between this job's own
        configurations mean anything: its remaining work is unknown too, so the policy counts it
        in time, from the GPU-seconds it has had.
        """
        singles: dict[str, int] = defaultdict(int)
        for m in self._one_per_class():
            for t, k in m:
                if k == "1":
                    singles[t] += 1
        reference = max(sorted(singles), key=lambda t: singles[t]) if singles else None
        speeds: dict[str, float] = {}

        def throughput(gpu_type: str, placement: tuple[int, ...]) -> float:
            if not placement or sum(placement) <= 0:
                return 0.0
            if gpu_type not in speeds:
                ratio = self.type_ratio(gpu_type, reference) if reference and gpu_type != reference else None
                speeds[gpu_type] = ratio or 1.0
            return speeds[gpu_type] * scaled({(1,): 1.0}, tuple(placement))

        return throughput


def _fresh_mean(dated: list[tuple[float, float]]) -> float:
    newest = max(at for at, _ in dated)
    fresh = [value for at, value in dated if at >= newest - FRESH_S]
    return sum(fresh) / len(fresh)


def _pooled_cells(values: dict[tuple[str, str], list[tuple[float, float]]]) -> dict[tuple[str, str], float]:
    """Each cell's fresh mean; a cell no twin measured lately is scaled by how the cells measured
    both then and lately changed (geometric mean of fresh over old): a sweep's first job measured
    1 and 2 GPUs alone (1,063 and 1,900/s), its twin now runs at 115/s on 1, and the 2-GPU cell,
    at its old 1,900, promised 16x for a resize."""
    pooled = {k: _fresh_mean(v) for k, v in values.items()}
    newest = {k: max(at for at, _ in v) for k, v in values.items()}
    latest = max(newest.values(), default=0.0)
    logs = []
    for k, dated in values.items():
        old = [value for at, value in dated if at < newest[k] - FRESH_S]
        if newest[k] >= latest - FRESH_S and old:
            logs.append(math.log(pooled[k] / (sum(old) / len(old))))
    if logs:
        drift = math.exp(sum(logs) / len(logs))
        for k in pooled:
            if newest[k] < latest - FRESH_S:
                pooled[k] *= drift
    return pooled


def profiling_model():
    """The profiling model's predictor (collaborative filtering), or None when it cannot be imported."""
    try:
        from heet_tui.profiling.predictor import ThroughputPredictor
    except ImportError:
        return None
    return ThroughputPredictor()
