"""What the policy is told about a job's speed: the truth (``--oracle``) or a prediction.

A real deployment never knows a job's throughput on configurations it has not run. The
simulator therefore hides the physics behind a :class:`ThroughputSource`. The oracle passes
the physics through; :class:`PredictedThroughput` starts each job from the few short runs a
real profiler makes (one GPU on every type, plus the requested count on one host of the
fastest type), predicts the rest from them, and learns the exact value of every configuration
the job actually runs on. Statistical efficiency is not predicted: like Pollux and AdaptDL, a
running job measures its own gradient noise scale, so the true efficiency is used in both modes.

Both return *goodput* in samples/s at the model's reference batch (see ``physics``), the unit
``JobView.throughput`` and ``remaining_samples`` share.
"""

from __future__ import annotations

import math
import random
from typing import Protocol

from heet_tui.core.sched_input import ThroughputFn
from heet_tui.sim.state import SimJob

Placement = tuple[int, ...]

# Relative error of one short profiling run (a few dozen steps): throughput measured over
# seconds on a shared host varies by a few percent.
PROFILING_NOISE = 0.05
# Prior scaling when a job has no multi-GPU observation: throughput ~ k**0.9, and each extra
# host costs 10 % (an all-reduce over the network instead of NVLink/PCIe).
DEFAULT_EXPONENT = 0.9
HOST_PENALTY = 0.9


class ThroughputSource(Protocol):
    def admit(self, job: SimJob) -> None: ...

    def view(self, job: SimJob) -> ThroughputFn: ...

    def observe(self, job: SimJob, gpu_type: str, placement: Placement) -> None: ...


def _efficiency(job: SimJob, gpu_type: str, placement: Placement) -> float:
    """Goodput / raw throughput at this configuration in the job's current epoch."""
    return job.physics.efficiency(gpu_type, placement, job.spec.batch_size, job.epoch)


def _raw(job: SimJob, gpu_type: str, placement: Placement) -> float:
    return job.physics.throughput(gpu_type, placement, job.spec.batch_size) / job.slowdown


class OracleThroughput:
    """The physics itself: what a perfectly profiled cluster would know."""

    def admit(self, job: SimJob) -> None:
        return None

    def view(self, job: SimJob) -> ThroughputFn:
        def goodput(gpu_type: str, placement: Placement) -> float:
            p = tuple(sorted((c for c in placement if c > 0), reverse=True))
            if not p:
                return 0.0
            return job.progress_rate(gpu_type, p) * job.physics.init_batch_size

        return goodput

    def observe(self, job: SimJob, gpu_type: str, placement: Placement) -> None:
        return None


class PredictedThroughput:
    """Raw throughput from a few measurements plus a scaling model, refined as jobs run."""

    def __init__(self, seed: int = 0, noise: float = PROFILING_NOISE,
                 host_sizes: dict[str, int] | None = None) -> None:
        self._seed = seed
        self._noise = noise
        self._host_sizes = dict(host_sizes or {})
        # keyed by profile class (model, global batch), as the controller keys them: a sweep's jobs
        # are profiled once and share what any of them measured (the demo measured each twin anew,
        # and one twin's 51k/s on 16 A100s left the next predicted at 62k/s)
        self._class: dict[str, tuple[str, int]] = {}
        self._obs: dict[tuple[str, int], dict[tuple[str, Placement], float]] = {}
        self._memo: dict[tuple[str, int], dict[tuple[str, Placement], float]] = {}

    def _key(self, job: SimJob) -> tuple[str, int]:
        return self._class.setdefault(job.id, (job.spec.application, job.spec.batch_size))

    def _measure(self, job: SimJob, gpu_type: str, placement: Placement, noisy: bool) -> None:
        value = _raw(job, gpu_type, placement)
        if value <= 0:
            return
        if noisy and self._noise > 0:
            rng = random.Random(f"{self._seed}/{job.id}/{gpu_type}/{placement}")
            value *= math.exp(rng.gauss(0.0, self._noise))
        self._obs.setdefault(self._key(job), {})[(gpu_type, placement)] = value
        self._memo.pop(self._key(job), None)

    def admit(self, job: SimJob) -> None:
        """The short runs a real profiler makes when the job is submitted (none for a twin of a
        job measured already)."""
        if self._obs.get(self._key(job)):
            return
        types = job.physics.gpu_types()
        for t in types:  # one GPU, else the fewest the job runs on (gpt_pmp's pipeline needs two)
            host = self._host_sizes.get(t, 8)
            smallest = next((k for k in range(1, min(host, job.physics.max_gpus(t)) + 1)
                             if _raw(job, t, (k,)) > 0), None)
            if smallest is not None:
                self._measure(job, t, (smallest,), noisy=True)
        singles = {t: v for (t, p), v in self._obs.get(self._key(job), {}).items() if p == (1,)}
        if singles:
            fastest = max(sorted(singles), key=lambda t: singles[t])
            host = self._host_sizes.get(fastest, 8)
            k = max(1, min(job.spec.num_replicas, host, job.physics.max_gpus(fastest)))
            if k > 1:
                self._measure(job, fastest, (k,), noisy=True)

    def observe(self, job: SimJob, gpu_type: str, placement: Placement) -> None:
        """A running job reports its measured throughput (averaged over a round: exact)."""
        known = self._obs.get(self._key(job), {}).get((gpu_type, placement))
        if known is None or known != _raw(job, gpu_type, placement):
            self._measure(job, gpu_type, placement, noisy=False)

    def measured(self, job_id: str) -> dict[tuple[str, Placement], float]:
        """What the profiling runs and running reports of the job's class measured (a copy)."""
        return dict(self._obs.get(self._class.get(job_id, ("", -1)), {}))

    def predict_raw(self, job: SimJob, gpu_type: str, placement: Placement) -> float:
        memo = self._memo.setdefault(self._key(job), {})
        key = (gpu_type, placement)
        value = memo.get(key)
        if value is None:
            value = memo[key] = self._predict_raw(job, gpu_type, placement)
        return value

    def _predict_raw(self, job: SimJob, gpu_type: str, placement: Placement) -> float:
        obs = self._obs.get(self._key(job), {})
        exact = obs.get((gpu_type, placement))
        if exact is not None:
            return exact
        k, hosts = sum(placement), len(placement)
        if sum(placement) > job.physics.max_gpus(gpu_type):
            return 0.0
        fewest = min((p for t, p in obs if t == gpu_type), key=lambda p: (sum(p), len(p)), default=None)
        if fewest is None:
            return 0.0
        base = obs[(gpu_type, fewest)] / (sum(fewest) ** DEFAULT_EXPONENT * HOST_PENALTY ** (len(fewest) - 1))
        # The job's own scaling, from its multi-GPU observation nearest in GPU count, on this type
        # when there is one: scaling differs by type (a job bound by communication on fast GPUs
        # still scales on slow ones), so another type's curve is only the fallback.
        multi = [(t != gpu_type, abs(math.log(sum(p) / k)), t, p, v) for (t, p), v in obs.items() if sum(p) > 1]
        exponent = DEFAULT_EXPONENT
        penalty = HOST_PENALTY
        if multi:
            _, _, t, p, v = min(multi)
            one = obs.get((t, (1,)))
            if one:
                per_host = penalty ** (len(p) - 1)
                exponent = min(max(math.log(max(v / (one * per_host), 1e-9)) / math.log(sum(p)), 0.0), 1.0)
        return base * k ** exponent * penalty ** (hosts - 1)

    def view(self, job: SimJob) -> ThroughputFn:
        def goodput(gpu_type: str, placement: Placement) -> float:
            p = tuple(sorted((c for c in placement if c > 0), reverse=True))
            if not p or job.physics.rate(gpu_type, p, job.spec.batch_size, 0) <= 0:
                return 0.0  # a size the job cannot run at is known, as with the model predictor
            raw = self.predict_raw(job, gpu_type, p)
            return raw * _efficiency(job, gpu_type, p) if raw > 0 else 0.0

        return goodput

    def forget(self, job_id: str) -> None:
        """A job ended: what its class measured stays for its twins, as the controller keeps it."""
        self._class.pop(job_id, None)
