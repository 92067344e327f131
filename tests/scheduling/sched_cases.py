"""Small builders for scheduler tests: clusters, jobs and a throughput family with known shape."""

from __future__ import annotations

from hypothesis import strategies as st

from heet_tui.core.allocation import Allocation
from heet_tui.core.sched_input import ClusterView, Constraints, HostView, JobView
from heet_tui.scheduling.curves import AmdahlCurve

SPEED = {"A100": 3.0, "RTX": 1.5, "T4": 1.0}


def curve(scale: float = 1.0, serial: float = 0.05, cross_host: float = 0.8, **speed: float) -> AmdahlCurve:
    base = {t: v * scale for t, v in SPEED.items()}
    base.update(speed)
    return AmdahlCurve(base, serial=serial, cross_host=cross_host)


def host(name: str, gpu_type: str, n: int, rack: str = "r0", free: tuple[int, ...] | None = None,
         drained: bool = False) -> HostView:
    return HostView(name, gpu_type, n, tuple(range(n)) if free is None else free, rack=rack, drained=drained)


def job(job_id: str, lo: int = 1, hi: int = 8, work: float = 1e5, fn=None, **kw) -> JobView:
    return JobView(job_id, lo, hi, fn or curve(), remaining_samples=work, **kw)


def alloc(job_id: str, gpu_type: str, **hosts: tuple[int, ...]) -> Allocation:
    return Allocation.of(job_id, gpu_type, hosts)


@st.composite
def rounds(draw, max_hosts: int = 6, max_jobs: int = 10) -> tuple[ClusterView, list[JobView]]:
    """A random cluster (some GPUs busy, some hosts drained) and jobs (some running, some constrained)."""
    types = draw(st.lists(st.sampled_from(sorted(SPEED)), min_size=1, max_size=3, unique=True))
    hosts = []
    for i in range(draw(st.integers(1, max_hosts))):
        t = draw(st.sampled_from(types))
        n = draw(st.sampled_from((1, 2, 4, 8)))
        free = tuple(g for g in range(n) if draw(st.booleans()) or n == 1)
        hosts.append(HostView(f"h{i}", t, n, free, rack=f"r{i % 2}", drained=draw(st.integers(0, 9)) == 0))
    cluster = ClusterView(tuple(hosts))
    types = list(cluster.gpu_types())
    taken: set[tuple[str, int]] = set()
    jobs = []
    for j in range(draw(st.integers(0, max_jobs))):
        lo = draw(st.integers(1, 3))
        hi = draw(st.integers(lo, 12))
        current = None
        if draw(st.booleans()):
            h = draw(st.sampled_from(hosts))
            gpus = [g for g in h.free if (h.name, g) not in taken][:draw(st.integers(1, 4))]
            if gpus:
                taken.update((h.name, g) for g in gpus)
                current = Allocation.of(f"j{j}", h.gpu_type, {h.name: gpus})
        c = Constraints()
        allowed = tuple(draw(st.lists(st.sampled_from(types), max_size=2, unique=True)))
        pick = draw(st.integers(0, 9))
        if pick == 0:
            c = Constraints(held=True)
        elif pick == 1:
            c = Constraints(pinned_type=draw(st.sampled_from(allowed or types)))  # an edit narrows the spec
        elif pick == 2:
            c = Constraints(fixed_count=draw(st.integers(1, 4)))
        elif pick == 3:
            fits = [h for h in hosts if not allowed or h.gpu_type in allowed]  # an edit narrows the spec
            c = Constraints(pinned_hosts=(draw(st.sampled_from(fits)).name,)) if fits else Constraints()
        remaining = draw(st.one_of(st.none(), st.floats(1e2, 1e7)))
        jobs.append(JobView(
            f"j{j}", lo, hi, curve(scale=draw(st.floats(0.2, 5.0)), serial=draw(st.floats(0.0, 0.3))),
            gpu_types=allowed, current=current, remaining_samples=remaining, restart_cost_s=draw(st.floats(0, 300)),
            age_s=draw(st.floats(0, 1e5)), attained_gpu_s=draw(st.floats(0, 1e5)),
            priority=draw(st.integers(-1, 1)), constraints=c,
            requested_gpus=draw(st.one_of(st.none(), st.integers(lo, hi)))))
    return cluster, jobs
