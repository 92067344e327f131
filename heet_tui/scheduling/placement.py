"""Host-level placement: turn "job j gets k GPUs of type t" into hosts and GPU indices.

Policies decide type and count against per-type capacity; this module decides where. Its
rules, in order of importance:

1. Stay put. A job keeps the GPUs it holds on its type (a shrink gives back GPUs from the
   hosts where it has the fewest, so it stays packed); moving a running job costs a restart.
   Except when it grows: a grow restarts it anyway, so if placing it afresh spans fewer hosts
   than growing around its GPUs, it moves.
2. The placement the policy priced. Usually that is the fewest hosts: spreading a
   data-parallel job puts its all-reduce on the network, which usually costs a lot. But a
   policy that prices spread placements too (``Problem(shapes=True)``) may find one faster
   (measured: yolov3 on one A100 of each of two hosts, 1.7x two on one host); a job that
   changes configuration then gets that shape on distinct hosts, placed before the packed
   jobs, and a job that keeps its configuration on a slower shape moves to it only when the
   time saved pays for a few restarts. When the shape cannot be formed, packing is the fallback.
3. One rack when possible; the job's current rack first.
4. Least fragmentation: best fit (the host whose free GPUs exceed the need by the least), so
   whole hosts stay free for the large jobs that wait. Large needs are placed first.

Per-type capacity is what policies respect, and any split over hosts is allowed, so every
target without pinned hosts fits. Jobs with pinned hosts are placed first; if one still
cannot get its count it gets what it can above its minimum, or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.problem import JobInfo, Problem


class _Free:
    """Free GPU indices per host, grouped by type, mutated as jobs are placed."""

    def __init__(self, problem: Problem) -> None:
        self.gpus: dict[str, list[int]] = {h: list(ix) for h, ix in problem.usable.items()}
        self.rack: dict[str, str] = {h.name: h.rack for h in problem.cluster.hosts}
        self.by_type: dict[str, list[str]] = {}
        for h in problem.cluster.hosts:
            if problem.usable[h.name]:
                self.by_type.setdefault(h.gpu_type, []).append(h.name)

    def copy(self) -> _Free:
        other = object.__new__(_Free)
        other.gpus = {h: list(g) for h, g in self.gpus.items()}
        other.rack, other.by_type = self.rack, self.by_type
        return other

    def take(self, host: str, n: int) -> list[int]:
        pool = self.gpus[host]
        got, self.gpus[host] = pool[:n], pool[n:]
        return got

    def give_back(self, hosts: Mapping[str, Sequence[int]]) -> None:
        for host, gpus in hosts.items():
            self.gpus[host] = sorted([*self.gpus[host], *gpus])

    def claim(self, host: str, gpus: Sequence[int]) -> list[int]:
        pool = self.gpus.get(host)
        if pool is None:
            return []
        wanted = set(gpus)
        got = [g for g in pool if g in wanted]
        self.gpus[host] = [g for g in pool if g not in wanted]
        return got


def place(problem: Problem, targets: Mapping[str, tuple[str, int]], order: Sequence[str] = ()) -> dict[str, Allocation]:
    """Allocations for ``targets`` (job id -> (GPU type, count)); ``order`` breaks ties (first wins)."""
    rank = {job_id: i for i, job_id in enumerate(order)}
    ids = sorted(targets, key=lambda j: (rank.get(j, len(rank)), j))
    free = _Free(problem)
    held: dict[str, dict[str, list[int]]] = {}
    for job_id in ids:
        gpu_type, count = targets[job_id]
        held[job_id] = _keep_current(problem.by_id[job_id], gpu_type, count, free)

    shaped = {job_id: shape for job_id in ids if (shape := _wanted_shape(problem, job_id, targets[job_id]))}

    def need_key(job_id: str) -> tuple:
        info = problem.by_id[job_id]
        have = sum(len(g) for g in held[job_id].values())
        return (info.hosts_allowed is None, job_id not in shaped, -(targets[job_id][1] - have),
                rank.get(job_id, len(rank)), job_id)

    result: dict[str, Allocation] = {}
    for job_id in sorted(ids, key=need_key):
        info = problem.by_id[job_id]
        gpu_type, count = targets[job_id]
        hosts = held[job_id]
        if job_id in shaped:
            free.give_back(hosts)
            spread = _fill_shape(gpu_type, shaped[job_id], free)
            if spread is not None:
                result[job_id] = Allocation.of(job_id, gpu_type, spread)
                continue
            hosts = held[job_id] = {h: got for h, g in hosts.items() if (got := free.claim(h, g))}
        need = count - sum(len(g) for g in hosts.values())
        if need > 0 and hosts and _repack_is_tighter(info, gpu_type, need, hosts, free):
            free.give_back(hosts)
            hosts = held[job_id] = {}
            need = count
        if need > 0:
            _fill(info, gpu_type, need, hosts, free)
        total = sum(len(g) for g in hosts.values())
        if total >= info.min_gpus and total > 0:
            result[job_id] = Allocation.of(job_id, gpu_type, hosts)
        else:
            free.give_back(hosts)
    return result


RESHAPE_RESTARTS = 3.0  # a kept job moves to its priced shape only if that saves this many restarts


def _wanted_shape(problem: Problem, job_id: str, target: tuple[str, int]) -> tuple[int, ...]:
    """The placement to realise afresh for a job, ``()`` to place it the usual way.

    A job that changes configuration restarts anyway, so it gets the spread placement the
    policy priced at no extra cost. A job that keeps its type and count but sits on a slower
    placement (its shape could not be formed when it started) moves only when the time saved
    on its remaining work pays for ``RESHAPE_RESTARTS`` restarts.
    """
    info = problem.by_id[job_id]
    gpu_type, count = target
    if not problem.shapes or count <= 0 or info.hosts_allowed is not None:
        return ()
    shape = problem.shape(info, gpu_type, count)
    if info.current_config != target:
        return shape if shape != problem.packed(gpu_type, count) else ()
    current = info.view.current.placement if info.view.current is not None else ()
    if current == shape:
        return ()
    now, best = problem.throughput_at(info.view, gpu_type, current), problem.throughput(info, gpu_type, count)
    if now <= 0 or best <= now:
        return ()
    remaining = problem.remaining_samples(info)
    saved = remaining / now - remaining / best
    return shape if saved > RESHAPE_RESTARTS * info.view.restart_cost_s else ()


def _fill_shape(gpu_type: str, shape: tuple[int, ...], free: _Free) -> dict[str, list[int]] | None:
    """``shape`` (GPUs per host, largest first) on as many distinct hosts, one rack if possible,
    each the best fit for its part; ``None`` (and nothing taken) when the free GPUs cannot form it."""
    candidates = [h for h in free.by_type.get(gpu_type, ()) if free.gpus[h]]
    racks = sorted({free.rack[h] for h in candidates})
    for pool in [[h for h in candidates if free.rack[h] == r] for r in racks] + [candidates]:
        trial, hosts = free.copy(), {}
        for part in shape:
            fits = [h for h in pool if h not in hosts and len(trial.gpus[h]) >= part]
            if not fits:
                break
            host = min(fits, key=lambda h: (len(trial.gpus[h]), h))
            hosts[host] = trial.take(host, part)
        else:
            free.gpus = trial.gpus
            return hosts
    return None


def _keep_current(info: JobInfo, gpu_type: str, count: int, free: _Free) -> dict[str, list[int]]:
    cur = info.view.current
    if cur is None or cur.gpu_type != gpu_type or count <= 0:
        return {}
    kept: dict[str, list[int]] = {}
    for host, gpus in cur.hosts:
        if info.hosts_allowed is not None and host not in info.hosts_allowed:
            continue
        if host not in free.by_type.get(gpu_type, ()):
            continue
        got = free.claim(host, gpus)
        if got:
            kept[host] = got
    excess = sum(len(g) for g in kept.values()) - count
    # Shrink from the hosts where the job has the fewest GPUs, so it stays on few hosts.
    for host in sorted(kept, key=lambda h: (len(kept[h]), h)):
        if excess <= 0:
            break
        drop = min(excess, len(kept[host]))
        back, kept[host] = kept[host][len(kept[host]) - drop:], kept[host][:len(kept[host]) - drop]
        free.give_back({host: back})
        excess -= drop
        if not kept[host]:
            del kept[host]
    return kept


def _fill(info: JobInfo, gpu_type: str, need: int, hosts: dict[str, list[int]], free: _Free) -> None:
    """Add ``need`` GPUs to ``hosts``: current hosts first, then best fit on one rack."""
    candidates = [h for h in free.by_type.get(gpu_type, ())
                  if free.gpus[h] and (info.hosts_allowed is None or h in info.hosts_allowed)]
    for host in sorted((h for h in candidates if h in hosts), key=lambda h: -len(free.gpus[h])):
        got = free.take(host, need)
        hosts[host] = hosts[host] + got
        need -= len(got)
        if need == 0:
            return
    candidates = [h for h in candidates if h not in hosts and free.gpus[h]]
    home_racks = {free.rack[h] for h in hosts}
    racks: dict[str, int] = {}
    for h in candidates:
        racks[free.rack[h]] = racks.get(free.rack[h], 0) + len(free.gpus[h])
    fitting = [r for r, n in racks.items() if n >= need]
    if fitting:
        rack = min(fitting, key=lambda r: (r not in home_racks, _hosts_needed(candidates, free, r, need), racks[r], r))
        pool = [h for h in candidates if free.rack[h] == rack]
    else:
        pool = candidates
    while need > 0 and pool:
        fits = [h for h in pool if len(free.gpus[h]) >= need]
        if fits:
            host = min(fits, key=lambda h: (len(free.gpus[h]), free.rack[h] not in home_racks, h))
        else:
            host = min(pool, key=lambda h: (-len(free.gpus[h]), free.rack[h] not in home_racks, h))
        got = free.take(host, need)
        hosts[host] = hosts.get(host, []) + got
        need -= len(got)
        pool = [h for h in pool if h != host]


def _repack_is_tighter(info: JobInfo, gpu_type: str, need: int, hosts: dict[str, list[int]], free: _Free) -> bool:
    """Whether a growing job would span fewer hosts placed afresh than grown around its GPUs.

    A grow restarts the job whatever GPUs it keeps, so staying put buys nothing then; but
    growing in place can spread it (1 GPU here + 3 there), and the all-reduce over the network
    costs far more than the move (a yolov3 grown from 1 to 4 T4s ran on 2 + 2 for hours).
    """
    kept_trial, kept_hosts = free.copy(), {h: list(g) for h, g in hosts.items()}
    _fill(info, gpu_type, need, kept_hosts, kept_trial)
    fresh_trial, fresh_hosts = free.copy(), {}
    fresh_trial.give_back(hosts)
    total = need + sum(len(g) for g in hosts.values())
    _fill(info, gpu_type, total, fresh_hosts, fresh_trial)
    got = sum(len(g) for g in fresh_hosts.values())
    return got >= sum(len(g) for g in kept_hosts.values()) and len(fresh_hosts) < len(kept_hosts)


def _hosts_needed(candidates: list[str], free: _Free, rack: str, need: int) -> int:
    sizes = sorted((len(free.gpus[h]) for h in candidates if free.rack[h] == rack), reverse=True)
    n = 0
    for size in sizes:
        need -= size
        n += 1
        if need <= 0:
            break
    return n

