"""One validated, pre-digested scheduling round shared by every policy.

Policies all need the same facts: which GPUs each host may give (free ones plus those the
jobs already hold, none on a drained host), how many GPUs of each type a job may use under
its constraints, and the job's throughput for a count of GPUs packed on as few hosts as the
cluster allows (or, with ``shapes``, on the fastest of that and a few spread placements).
Computing them once, with the input checks in one place, keeps each policy about its decision
and makes bad input fail the same way everywhere (``ValueError``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from heet_tui.core.allocation import Allocation
from heet_tui.core.gpu import type_allowed
from heet_tui.core.sched_input import ClusterView, Constraints, JobView

# A job whose remaining work is unknown is assumed to need at least this much one-GPU time:
# the attained service is then the estimate (heavy-tailed job sizes: the longer a job has
# run, the longer it is likely to run), as in least-attained-service schedulers.
MIN_UNKNOWN_WORK_S = 600.0


def spread_placements(count: int, host_size: int, hosts: int, most_hosts: int = 4) -> list[tuple[int, ...]]:
    """Placements of ``count`` GPUs over 2..``most_hosts`` hosts: every split over two hosts,
    and the most even one over more.

    Why: measured throughput is not always best packed. On the Sia A100 hosts yolov3 runs 1.7x
    faster on one GPU of each of two hosts than on two GPUs of one (the hosts' shared links, not
    the network, are the bottleneck), imagenet 1.2x faster on 3 + 1 than on 4.
    """
    out: list[tuple[int, ...]] = []
    if hosts >= 2:
        out.extend((count - a, a) for a in range(1, count // 2 + 1) if count - a <= host_size)
    for h in range(3, min(count, hosts, most_hosts) + 1):
        base, extra = divmod(count, h)
        shape = (base + 1,) * extra + (base,) * (h - extra)
        if shape[0] <= host_size:
            out.append(shape)
    return out


def packed_placement(count: int, host_size: int) -> tuple[int, ...]:
    """GPUs per host for ``count`` GPUs on hosts of ``host_size`` GPUs, filled one by one."""
    if count <= 0:
        return ()
    size = max(1, host_size)
    full, rest = divmod(count, size)
    return (size,) * full + ((rest,) if rest else ())


@dataclass(slots=True)
class JobInfo:
    """A job with its constraints resolved: what it may get, and its throughput memo."""

    view: JobView
    id: str
    index: int
    min_gpus: int
    max_gpus: int
    caps: dict[str, int]  # gpu type -> GPUs this job could use (after pinned hosts), >= min_gpus
    hosts_allowed: frozenset[str] | None  # None: any host
    current_config: tuple[str, int] | None  # (type, count) when its current allocation may be kept
    _memo: dict[tuple[str, int], float] = field(default_factory=dict)
    _shape: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)  # fastest placement
    _remaining: float | None = None


class Problem:
    """The cluster and jobs of one round, checked and indexed for fast lookups."""

    def __init__(self, cluster: ClusterView, jobs: Sequence[JobView], shapes: bool = False) -> None:
        """``shapes``: a count's throughput is the best over its packed and balanced spread
        placements (and ``shape`` names the winner for placement); else packed only."""
        _check_cluster(cluster)
        self.shapes = shapes
        self.cluster = cluster
        self.jobs: tuple[JobView, ...] = tuple(jobs)
        self.current: dict[str, Allocation] = {}
        seen: set[str] = set()
        for job in self.jobs:
            if job.id in seen:
                raise ValueError(f"job {job.id!r}: duplicate job id")
            seen.add(job.id)
            if job.current is not None and job.current.num_gpus > 0:
                self.current[job.id] = job.current
        self.usable: dict[str, tuple[int, ...]] = _usable_gpus(cluster, self.current)
        self.types: tuple[str, ...] = cluster.gpu_types()
        self._host_names = frozenset(h.name for h in cluster.hosts)
        self._host_types = {h.name: h.gpu_type for h in cluster.hosts}
        self.capacity: dict[str, int] = {t: 0 for t in self.types}
        self.host_size: dict[str, int] = {t: 1 for t in self.types}
        self.host_count: dict[str, int] = {t: 0 for t in self.types}
        for host in cluster.hosts:
            n = len(self.usable[host.name])
            self.capacity[host.gpu_type] += n
            self.host_size[host.gpu_type] = max(self.host_size[host.gpu_type], n)
            self.host_count[host.gpu_type] += n > 0
        self._packed: dict[tuple[str, int], tuple[int, ...]] = {}
        self._spread: dict[tuple[str, int], list[tuple[int, ...]]] = {}  # the same for every job
        self.infos: list[JobInfo] = [self._resolve(i, job) for i, job in enumerate(self.jobs)]
        self.by_id: dict[str, JobInfo] = {info.id: info for info in self.infos}

    @property
    def total_capacity(self) -> int:
        return sum(self.capacity.values())

    def throughput(self, info: JobInfo, gpu_type: str, count: int) -> float:
        """Samples/s for ``count`` GPUs of ``gpu_type`` packed on few hosts, or with ``shapes``
        on the fastest of its candidate placements (memoised, checked)."""
        if count <= 0:
            return 0.0
        key = (gpu_type, count)
        value = info._memo.get(key)
        if value is None:
            packed = self.packed(gpu_type, count)
            value, best = self.throughput_at(info.view, gpu_type, packed), packed
            if self.shapes:
                spread = self._spread.get(key)
                if spread is None:
                    spread = self._spread[key] = spread_placements(count, self.host_size[gpu_type],
                                                                   self.host_count[gpu_type])
                for shape in spread:
                    other = self.throughput_at(info.view, gpu_type, shape)
                    if other > value:
                        value, best = other, shape
            info._memo[key] = value
            info._shape[key] = best
        return value

    def packed(self, gpu_type: str, count: int) -> tuple[int, ...]:
        key = (gpu_type, count)
        placement = self._packed.get(key)
        if placement is None:
            placement = self._packed[key] = packed_placement(count, self.host_size[gpu_type])
        return placement

    def shape(self, info: JobInfo, gpu_type: str, count: int) -> tuple[int, ...]:
        """The placement ``throughput`` priced for this count: what placement should realise."""
        if count <= 0:
            return ()
        self.throughput(info, gpu_type, count)
        return info._shape[(gpu_type, count)]

    @staticmethod
    def throughput_at(job: JobView, gpu_type: str, placement: tuple[int, ...]) -> float:
        """The job's own throughput function, with NaN/negative/non-numeric results refused."""
        if not placement:
            return 0.0
        try:
            value = float(job.throughput(gpu_type, placement))
        except Exception as exc:  # a caller's function failing is bad input to the policy, named as such
            raise ValueError(f"job {job.id!r}: throughput({gpu_type!r}, {placement}) failed or is not a number: "
                             f"{type(exc).__name__}: {exc}") from exc
        if math.isnan(value) or math.isinf(value) or value < 0:
            raise ValueError(f"job {job.id!r}: throughput({gpu_type!r}, {placement}) = {value} "
                             "(must be a finite number >= 0)")
        return value

    def best_single(self, info: JobInfo) -> float:
        """The best one-GPU throughput over the job's allowed types (0 if it can run nowhere)."""
        return max((self.throughput(info, t, 1) for t in info.caps), default=0.0)

    def remaining_samples(self, info: JobInfo) -> float:
        """Remaining work; unknown work is estimated from attained service (see module note)."""
        if info._remaining is None:
            job = info.view
            if job.remaining_samples is not None:
                info._remaining = max(float(job.remaining_samples), 1.0)
            else:
                per_gpu = max(self.best_single(info), 1e-9)
                info._remaining = max(job.attained_gpu_s, MIN_UNKNOWN_WORK_S) * per_gpu
        return info._remaining

    def _resolve(self, index: int, job: JobView) -> JobInfo:
        _check_job(job, self.types, self._host_names)
        c = job.constraints
        if c.pinned_hosts and (wrong := pinned_hosts_of_other_types(job, {h.name: h.gpu_type
                                                                           for h in self.cluster.hosts})):
            raise ValueError(f"job {job.id!r}: {wrong}")
        lo, hi = job.min_gpus, job.max_gpus
        if c.fixed_count is not None:
            lo = hi = c.fixed_count
        hosts_allowed = frozenset(c.pinned_hosts) if c.pinned_hosts else None
        caps: dict[str, int] = {}
        if not c.held:
            for t in self.types:
                if not job.allows(t):
                    continue
                if hosts_allowed is None:
                    cap = self.capacity[t]
                else:
                    cap = sum(len(self.usable[h.name]) for h in self.cluster.hosts
                              if h.gpu_type == t and h.name in hosts_allowed)
                cap = min(cap, hi)
                if cap >= lo:
                    caps[t] = cap
        current = self._keepable(job, lo, hi, hosts_allowed)
        info = JobInfo(job, job.id, index, lo, hi, caps, hosts_allowed, current)
        # A type where the job's throughput is 0 at every count it may get is one it cannot run on
        # (sched_input): heet gave such a job the only free GPU, of a type nothing had measured it
        # on, rather than leave it waiting for the GPUs it can use.
        for t in [t for t, cap in caps.items() if not any(self.throughput(info, t, n) > 0 for n in range(lo, cap + 1))]:
            del caps[t]
        return info

    def _keepable(self, job: JobView, lo: int, hi: int, hosts_allowed: frozenset[str] | None) -> tuple[str, int] | None:
        """``(type, count)`` of the current allocation if the job could keep it unchanged."""
        cur = job.current
        if cur is None or cur.num_gpus == 0 or job.constraints.held:
            return None
        if not (lo <= cur.num_gpus <= hi) or not job.allows(cur.gpu_type):
            return None
        for host, gpus in cur.hosts:
            if hosts_allowed is not None and host not in hosts_allowed:
                return None
            usable = self.usable.get(host)
            if usable is None or not set(gpus) <= set(usable) or self.host_type(host) != cur.gpu_type:
                return None
        return cur.gpu_type, cur.num_gpus

    def host_type(self, name: str) -> str:
        return self._host_types[name]


def _usable_gpus(cluster: ClusterView, current: dict[str, Allocation]) -> dict[str, tuple[int, ...]]:
    """Per host, the GPUs a plan may hand out: free ones plus those heet jobs hold now.

    Callers differ in whether ``free`` already includes the GPUs heet jobs hold; taking the
    union makes both readings give the same answer. Drained hosts give nothing.
    """
    held: dict[str, set[int]] = {}
    for alloc in current.values():
        for host, gpus in alloc.hosts:
            held.setdefault(host, set()).update(gpus)
    usable: dict[str, tuple[int, ...]] = {}
    for host in cluster.hosts:
        if host.drained:
            usable[host.name] = ()
        else:
            gpus = set(host.free) | held.get(host.name, set())
            usable[host.name] = tuple(sorted(g for g in gpus if 0 <= g < host.gpu_count))
    return usable


def _check_cluster(cluster: ClusterView) -> None:
    names: set[str] = set()
    for host in cluster.hosts:
        if host.name in names:
            raise ValueError(f"host {host.name!r}: duplicate host name")
        names.add(host.name)
        if not host.gpu_type:
            raise ValueError(f"host {host.name!r}: empty GPU type")
        if host.gpu_count < 0:
            raise ValueError(f"host {host.name!r}: negative GPU count {host.gpu_count}")
        bad = [g for g in host.free if g < 0 or g >= host.gpu_count]
        if bad:
            raise ValueError(f"host {host.name!r}: free GPU indices {bad} outside 0..{host.gpu_count - 1}")
        if len(set(host.free)) != len(host.free):
            raise ValueError(f"host {host.name!r}: duplicate free GPU indices {list(host.free)}")


def _check_job(job: JobView, types: tuple[str, ...], hosts: frozenset[str]) -> None:
    c = job.constraints
    if job.min_gpus < 1:
        raise ValueError(f"job {job.id!r}: min_gpus must be >= 1, got {job.min_gpus}")
    if job.max_gpus < job.min_gpus:
        raise ValueError(f"job {job.id!r}: max_gpus {job.max_gpus} < min_gpus {job.min_gpus}")
    if job.requested_gpus is not None and job.requested_gpus < 1:
        raise ValueError(f"job {job.id!r}: requested_gpus must be >= 1, got {job.requested_gpus}")
    for name, value in (("remaining_samples", job.remaining_samples), ("restart_cost_s", job.restart_cost_s),
                        ("age_s", job.age_s), ("attained_gpu_s", job.attained_gpu_s)):
        if value is not None and (math.isnan(value) or value < 0):
            raise ValueError(f"job {job.id!r}: {name} must be >= 0, got {value}")
    for name, value in (("finish_time_scale", job.finish_time_scale),
                        ("statistical_efficiency", job.statistical_efficiency)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"job {job.id!r}: {name} must be finite and > 0, got {value}")
    if c.fixed_count is not None and c.fixed_count < 1:
        raise ValueError(f"job {job.id!r}: fixed GPU count must be >= 1, got {c.fixed_count}")
    missing_type, missing = missing_pins(c, types, hosts)
    if missing_type is not None:
        raise ValueError(f"job {job.id!r}: pinned GPU type {missing_type!r} is not in the cluster "
                         f"(types: {', '.join(types) or 'none'})")
    if missing:
        raise ValueError(f"job {job.id!r}: pinned hosts {missing} are not among the hosts ready now")
    if c.pinned_type is not None and not type_allowed(c.pinned_type, job.gpu_types):
        raise ValueError(f"job {job.id!r}: pinned GPU type {c.pinned_type!r} is not one its spec allows "
                         f"(gpu_types: {', '.join(job.gpu_types)})")


def pinned_hosts_of_other_types(job: JobView, host_types: dict[str, str]) -> str:
    """Why none of the job's pinned hosts has a GPU type it may use ("" when one has): pinned to
    an A100 host, a T4-only job was planned nowhere, and read "the plan gives the free GPUs to no job"."""
    kinds = pinned_off_types(job.constraints.pinned_hosts, job.allows, host_types)
    allowed = job.constraints.pinned_type or ", ".join(job.gpu_types)
    return f"pinned hosts {kinds} have no GPU type it may use ({allowed})" if kinds else ""


def pinned_off_types(pinned_hosts: Collection[str], allows: Callable[[str], bool], host_types: dict[str, str]) -> str:
    """``"a100-1 (A100), ..."`` when none of the pinned hosts (of those known) has a type ``allows``; ""."""
    pinned = [h for h in pinned_hosts if h in host_types]
    if not pinned or any(allows(host_types[h]) for h in pinned):
        return ""
    return ", ".join(f"{h} ({host_types[h]})" for h in pinned)


def missing_pins(c: Constraints, types: Collection[str], hosts: Collection[str]) -> tuple[str | None, list[str]]:
    """The pinned GPU type (if any) and pinned hosts that ``types`` and ``hosts`` lack."""
    missing_type = c.pinned_type if c.pinned_type is not None and c.pinned_type not in types else None
    return missing_type, [h for h in c.pinned_hosts if h not in hosts]
