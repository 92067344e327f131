"""Synthetic snapshots of any size, for the UI benchmark and the UI tests.

The shapes follow the reference cluster of the shared workloads (T4 x4, RTX2080Ti x8 and A100
x8 nodes); values are a deterministic function of the seed and the step, so successive
snapshots change the way a live cluster does: progress advances, a few jobs change state, a
host drops out now and then, and a plan is pending.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.job import JobState
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect
from heet_tui.core.snapshot import HostStatus, JobProfile, JobStatus, ProfileCell, Snapshot

NODE_TYPES = (("T4", 4, "aws"), ("RTX2080Ti", 8, "rtx"), ("A100", 8, "dgx"))
MODELS = ("cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf")
SPEED = {"T4": 1.0, "RTX2080Ti": 1.6, "A100": 3.5}


@dataclass(frozen=True, slots=True)
class SyntheticCluster:
    hosts: int
    jobs: int
    seed: int = 7

    def snapshot(self, step: int = 0) -> Snapshot:
        rng = random.Random(self.seed)
        host_shapes = [NODE_TYPES[i % len(NODE_TYPES)] for i in range(self.hosts)]
        names = [f"{kind[2]}-{i:03d}" for i, kind in enumerate(host_shapes)]
        free = {n: list(range(shape[1])) for n, shape in zip(names, host_shapes, strict=True)}
        by_type: dict[str, list[str]] = {}
        for n, shape in zip(names, host_shapes, strict=True):
            by_type.setdefault(shape[0], []).append(n)
        now = 600.0 + 10.0 * step
        jobs: list[JobStatus] = []
        gpu_jobs: dict[str, list[tuple[int, str]]] = {n: [] for n in names}
        for j in range(self.jobs):
            job_id = f"job-{j:04d}"
            model = MODELS[j % len(MODELS)]
            want = rng.choice((1, 1, 2, 4, 8))
            gpu_type = rng.choice(list(by_type))
            alloc = None
            # Every 37th job changes state each step, so rows really move under a sorted view.
            flip = (j + step) % 37 == 0
            alloc_hosts: dict[str, list[int]] = {}
            need = want
            for host in by_type[gpu_type]:
                if need == 0:
                    break
                take = free[host][:need]
                if take:
                    alloc_hosts[host] = take
                    free[host] = free[host][len(take):]
                    need -= len(take)
            if need == 0 and not flip:
                alloc = Allocation.of(job_id, gpu_type, alloc_hosts)
                for host, ix in alloc_hosts.items():
                    gpu_jobs[host].extend((i, job_id) for i in ix)
                state = JobState.RUNNING
            else:
                for host, ix in alloc_hosts.items():
                    free[host] = sorted(free[host] + ix)
                state = JobState.PROFILING if flip else JobState.QUEUED
            base = 200.0 * SPEED[gpu_type] * want ** 0.9
            progress = min(1.0, (rng.random() * 0.5 + step * 0.002)) if alloc else rng.random() * 0.1
            tput = base * (0.9 + 0.2 * ((step * 7 + j) % 11) / 10) if alloc else 0.0
            jobs.append(JobStatus(
                id=job_id, name=f"{model}-{j}", state=state, model=model, allocation=alloc,
                progress=progress, throughput=tput, eta_s=(1 - progress) * 3600 if alloc else None,
                restarts=j % 4, submitted_at=float(j), min_gpus=1, max_gpus=max(want, 2),
                log_tail=tuple(f"@heet-progress step {k * 10 + step}" for k in range(3)) if alloc else (),
                events=(f"t={j}s submitted",),
            ))
        hosts = []
        for i, (n, shape) in enumerate(zip(names, host_shapes, strict=True)):
            gone = (i + step) % 97 == 0
            gpus = tuple(Gpu(k, shape[0], 16000, source="nvml", utilization=float((k * 13 + step * 5 + i) % 100),
                             memory_used_mb=(k * 1700 + step * 100) % 16000) for k in range(shape[1]))
            hosts.append(HostStatus(
                name=n, state=HostState.UNREACHABLE if gone else HostState.READY,
                message="connection reset" if gone else "", gpus=gpus, rack=f"r{i // 8}", gpu_source="nvml",
                last_seen=now - (40.0 if gone else 1.0), gpu_jobs=tuple(sorted(gpu_jobs[n])), rtt_ms=0.4,
            ))
        current = {j.id: j.allocation for j in jobs if j.allocation is not None}
        proposed = dict(current)
        preds = []
        for job in jobs[: min(40, len(jobs))]:
            if job.allocation is not None and job.allocation.num_gpus > 1 and job.allocation.hosts:
                host, ix = job.allocation.hosts[0]
                proposed[job.id] = Allocation.of(job.id, job.allocation.gpu_type, {host: ix[:1]})
                preds.append(JobPrediction(job.id, job.throughput, job.throughput * 0.6, 5400.0, 30.0))
        plan = Plan.build(current, proposed, policy="heet", now=now,
                          effect=PredictedEffect(tuple(preds), avg_jct_s=4000.0, avg_jct_before_s=4400.0))
        profiles = tuple(JobProfile(j.id, tuple(
            ProfileCell(t, c, 100.0 * SPEED[t] * int(c[0]) * len(c) ** 0.8, measured=(c == "1"),
                        uncertainty=0.0 if c == "1" else 0.15)
            for t in SPEED for c in ("1", "2", "4", "22", "8"))) for j in jobs[:50])
        return Snapshot(now=now, hosts=tuple(hosts), jobs=tuple(jobs), plan=plan, plan_id=step + 1,
                        profiles=profiles, policy="heet", mode="demo")
