"""Synthetic heterogeneous rounds (cluster + jobs) for the scheduler benchmark and tests.

Deterministic for a seed. Hosts have 4-8 GPUs of one of 3-5 types, spread over racks of up
to 8 hosts; jobs pick a throughput function from the given family, an elastic range, a
remaining amount of work (log-uniform over two decades, so short and long jobs mix) and an
age. ``advance`` turns a plan into the next round's input, so a benchmark can time steady
state rounds where most jobs already run, as a real controller sees them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, HostView, JobView, ThroughputFn
from heet_tui.scheduling.curves import AmdahlCurve

DEFAULT_TYPES = ("A100", "V100", "RTX2080Ti", "T4", "A10")
SYNTHETIC_SPEED = {"A100": 3.0, "V100": 2.0, "RTX2080Ti": 1.4, "T4": 1.0, "A10": 1.6}


def make_cluster(gpus: int, seed: int = 0, types: Sequence[str] = DEFAULT_TYPES[:4]) -> ClusterView:
    """About ``gpus`` GPUs (exactly, when hosts of 4-8 can add up to it) over ``types``."""
    if gpus < 1:
        raise ValueError(f"synthetic cluster: need at least 1 GPU, got {gpus}")
    rng = random.Random(seed)
    hosts: list[HostView] = []
    left, i = gpus, 0
    while left > 0:
        gpu_type = types[i % len(types)]
        size = min(left, rng.choice((4, 8)) if left > 8 else left)
        rack = f"r{i // 8}"
        hosts.append(HostView(f"h{i:04d}", gpu_type, size, tuple(range(size)), rack=rack))
        left -= size
        i += 1
    return ClusterView(tuple(hosts))


def amdahl_family(types: Sequence[str], seed: int = 0, count: int = 8) -> dict[str, ThroughputFn]:
    """``count`` synthetic models: per-type speeds jittered, serial fractions 1-20 %."""
    rng = random.Random(seed)
    out: dict[str, ThroughputFn] = {}
    for m in range(count):
        speed = {t: SYNTHETIC_SPEED.get(t, 1.0) * rng.uniform(0.5, 1.5) * 100 for t in types}
        out[f"model{m}"] = AmdahlCurve(speed, serial=rng.uniform(0.01, 0.2), cross_host=rng.uniform(0.6, 0.95))
    return out


def make_jobs(cluster: ClusterView, per_gpu: float, models: Mapping[str, ThroughputFn], seed: int = 0) -> list[JobView]:
    rng = random.Random(seed)
    total = sum(h.gpu_count for h in cluster.hosts)
    names = sorted(models)
    jobs: list[JobView] = []
    for i in range(max(1, round(total * per_gpu))):
        model = names[rng.randrange(len(names))]
        fn = models[model]
        lo = rng.choice((1, 1, 1, 2))
        hi = max(lo, rng.choice((1, 2, 4, 8, 16)))
        one = max((fn(t, (1,)) for t in cluster.gpu_types()), default=1.0) or 1.0
        work_s = 10 ** rng.uniform(2.5, 4.5)  # one-GPU seconds of work: ~5 min to ~9 h
        jobs.append(JobView(
            id=f"j{i:05d}", min_gpus=lo, max_gpus=hi, throughput=fn,
            remaining_samples=work_s * one, restart_cost_s=rng.choice((15.0, 25.0, 50.0, 80.0, 120.0, 250.0)),
            age_s=rng.uniform(0, 3600), requested_gpus=rng.randint(lo, hi), submitted_at=-rng.uniform(0, 3600)))
    return jobs


def advance(jobs: Sequence[JobView], plan: Plan, seconds: float) -> list[JobView]:
    """The next round: jobs take the plan's allocations, progress for ``seconds``, age."""
    out = []
    for job in jobs:
        alloc = plan.allocations.get(job.id)
        done = job.throughput(alloc.gpu_type, alloc.placement) * seconds if alloc else 0.0
        remaining = None if job.remaining_samples is None else max(1.0, job.remaining_samples - done)
        gpu_s = alloc.num_gpus * seconds if alloc else 0.0
        out.append(replace(job, current=alloc, remaining_samples=remaining, age_s=job.age_s + seconds,
                           attained_gpu_s=job.attained_gpu_s + gpu_s))
    return out
