"""``rigid-fifo``: the rigid reference policy of ``shared/data/reference``, exactly as described.

It exists to validate the simulator against the published reference results, not to schedule
real clusters well: every round, running jobs keep their GPUs (never preempted or resized);
waiting jobs, in submission order, each get exactly their requested GPU count, capped by the
largest count the job can run at on a type (never below its ``min_gpus``), on the GPU type where
the job's one-GPU throughput (per-GPU at its count, for a model no single GPU runs) is highest
among types that still have that many free GPUs, packed onto the hosts with the most
free GPUs first. A job that fits nowhere waits without blocking later jobs.

The policy only sees what every policy sees (``JobView.throughput``): a count the job cannot run
at on a type has throughput 0, which is how the cap "largest GPU count profiled for that model on
that type" reaches it. User constraints (held, pinned type/hosts, fixed count) are respected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, HostView, JobView


def _packed(count: int, host_size: int) -> tuple[int, ...]:
    full, rest = divmod(count, max(host_size, 1))
    return (host_size,) * full + ((rest,) if rest else ())


class RigidFifoPolicy:
    name = "rigid-fifo"
    caps_rigid_count = True  # _count_on(): at most the request; a job runnable at none of those never runs

    def __init__(self, predict: bool = True) -> None:
        self.predict = predict  # accepted like every policy's; rigid-fifo never predicts anything

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        hosts = [h for h in cluster.hosts if not h.drained]
        free: dict[str, set[int]] = {h.name: set(h.free) for h in hosts}
        current: dict[str, Allocation] = {}
        proposed: dict[str, Allocation] = {}
        for job in jobs:
            if job.current is not None and job.current.num_gpus > 0:
                current[job.id] = job.current
                proposed[job.id] = job.current
                for host, gpus in job.current.hosts:
                    if host in free:
                        free[host] -= set(gpus)
        host_size: dict[str, int] = {}
        for h in hosts:
            host_size[h.gpu_type] = max(host_size.get(h.gpu_type, 0), h.gpu_count)
        waiting = sorted((j for j in jobs if j.id not in proposed and not j.constraints.held),
                         key=lambda j: (j.submitted_at, j.id))
        for job in waiting:
            alloc = self._place(job, hosts, free, host_size)
            if alloc is not None:
                proposed[job.id] = alloc
                for host, gpus in alloc.hosts:
                    free[host] -= set(gpus)
        return Plan.build(current, proposed, policy=self.name, now=now)

    def _count_on(self, job: JobView, gpu_type: str, host_size: int) -> int:
        """The requested count, capped at the largest count the job can run at on this type, and
        never below its ``min_gpus`` (a 20-GPU job with min_gpus 17 was started on 16)."""
        want = job.constraints.fixed_count or job.requested_gpus or job.min_gpus
        low = max(job.min_gpus, 1)

        def runs(k: int) -> bool:
            return job.throughput(gpu_type, _packed(k, host_size)) > 0

        if want - low <= LINEAR_SCAN:
            return next((k for k in range(want, low - 1, -1) if runs(k)), 0)
        return _largest_running(runs, low, want)

    def _place(self, job: JobView, hosts: list[HostView], free: dict[str, set[int]],
               host_size: dict[str, int]) -> Allocation | None:
        allowed_hosts = set(job.constraints.pinned_hosts)
        types = [t for t in sorted(host_size) if job.allows(t)]
        counts = {t: self._count_on(job, t, host_size[t]) for t in types}
        # one GPU's speed on each type; for a model that runs on no single GPU (gpt_pmp), per GPU at
        # its count there: it was skipped on every type and waited out the run, "allocated nothing"
        speed = {t: job.throughput(t, (1,)) or (job.throughput(t, _packed(k, host_size[t])) / k if k else 0.0)
                 for t, k in counts.items()}
        for t in sorted(types, key=lambda t: (-speed[t], t)):
            k = counts[t]
            if speed[t] <= 0 or k <= 0:
                continue
            candidates = [h for h in hosts if h.gpu_type == t and (not allowed_hosts or h.name in allowed_hosts)]
            if sum(len(free[h.name]) for h in candidates) < k:
                continue
            chosen: dict[str, list[int]] = {}
            left = k
            for h in sorted(candidates, key=lambda h: (-len(free[h.name]), h.name)):
                if left == 0:
                    break
                take = sorted(free[h.name])[:left]
                if take:
                    chosen[h.name] = take
                    left -= len(take)
            return Allocation.of(job.id, t, chosen)
        return None


LINEAR_SCAN = 64  # counts tried one by one; a wider range (a typo of 100,000 replicas) is searched


def _largest_running(runs: Callable[[int], bool], low: int, high: int) -> int:
    """The largest count in ``low..high`` the job runs at (0 if none), in a few lookups: the counts
    a model runs at are one range (from its smallest to its largest profiled), so the search
    steps down from ``high`` in doubling strides to a count that runs, or to ``low``, then halves
    the gap. Counted down one by one, 100,000 replicas took minutes of lookups in one round."""
    if runs(high):
        return high
    above, before, stride = high, high, 1  # counts known not to run: the lowest, and the one tried before it
    while True:
        k = max(low, above - stride)
        if runs(k):
            break
        if k == low:  # strode past the range, which then starts between ``low`` and ``before``
            k = next((c for c in range(low + 1, min(before, low + LINEAR_SCAN)) if runs(c)), 0)
            if not k:
                return 0
            above = before
            break
        above, before, stride = k, above, stride * 2
    while above - k > 1:
        mid = (k + above) // 2
        k, above = (mid, above) if runs(mid) else (k, mid)
    return k
