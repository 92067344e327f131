"""Hosts where jobs die at once: the job is retried elsewhere, and a broken host is drained.

A host whose driver lost its GPUs, or that lacks a mount or a module its peers have, crashes
every run sent to it before its first progress line. Each crash counted against the job and
the next try went wherever GPUs were free, often the same host: seen, job b was profiled
three times on a T4 host without its GPUs ("CUDA error: no CUDA-capable device") and failed,
while the A100 host beside it was free.

- **Retry elsewhere.** A run alone on a host that crashes (or is refused) before its first
  progress report makes its profile class keep off that host, in profiling and in plans, while
  other hosts can hold it; a progress report from the class on that host lifts it.
- **Drain a broken host.** When runs of at least two profile classes crashed so on one host,
  with no run there reporting progress since, and one of the jobs that crashed has made progress
  on another host of the same GPU type at the same count, where it has not crashed since (so
  neither the job's own bug nor a model too large for the type's memory explains it), the host
  is drained: plans move nothing
  there until the user puts it back in service. The crashes it caused are forgiven: they do
  not count against the jobs' retries, and the sizes they marked as crashing are given back.
  The evidence is the crashing job's own progress, not its class's: a job with a typo'd script
  shares its model and batch with a sweep that ran, and two such jobs had every A100 host
  drained "as broken", each host for the other's sake.

Which hosts each class keeps off is kept in the store (``AVOIDED``): a restarted controller
sent each class back once to the host it had crashed on, a retry lost per class and restart.
The drain's evidence is not kept: a drain needs crashes seen afresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from heet_tui.control.crashed_sizes import save_crashed_sizes
from heet_tui.control.drains import set_drained
from heet_tui.control.runtime import LAUNCH_REFUSED, Run
from heet_tui.core.gpu import type_allowed
from heet_tui.core.host import HostState
from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.execution import Executor
    from heet_tui.control.planning import JobInput
    from heet_tui.control.store import Store
    from heet_tui.core.sched_input import ClusterView
    from heet_tui.core.snapshot import HostStatus

EVIDENCE_CLASSES = 2
AVOIDED = "crash_avoided"  # store setting: [[model, batch, [hosts]], ...]

JobClass = tuple[str, int]  # (model, batch size): jobs of one class run the same code


@dataclass(frozen=True, slots=True)
class EarlyCrash:
    at: float
    job_id: str
    job_class: JobClass
    size: tuple[str, int]  # (GPU type, count) it ran at
    why: str
    crashed_size: tuple[str, int] | None  # the size this crash marked as one the job cannot run at


@dataclass(slots=True)
class HostHealth:
    crashes: dict[str, list[EarlyCrash]] = field(default_factory=dict)  # host -> since its last progress report
    ran_on: dict[JobClass, set[tuple[str, str, int]]] = field(default_factory=dict)  # (host, type, GPUs)
    job_ran_on: dict[str, set[tuple[str, str, int]]] = field(default_factory=dict)  # by job id, as ran_on
    avoided: dict[JobClass, set[str]] = field(default_factory=dict)  # hosts the class crashed on at once
    # which jobs' crashes keep it off each host (this controller's: not kept in the store)
    avoided_by: dict[tuple[JobClass, str], set[str]] = field(default_factory=dict)
    saved: Callable[[dict[JobClass, set[str]]], None] = lambda avoided: None  # called when ``avoided`` changes

    def reported(self, run: Run, job_class: JobClass | None) -> None:
        """A run reported progress: its hosts work, for its class at its size."""
        for host in run.alloc.host_names:
            self.crashes.pop(host, None)
            self.job_ran_on.setdefault(run.job_id, set()).add((host, run.alloc.gpu_type, run.alloc.num_gpus))
            if job_class is not None:
                self.ran_on.setdefault(job_class, set()).add((host, run.alloc.gpu_type, run.alloc.num_gpus))
                if host in self.avoided.get(job_class, ()):
                    self.avoided[job_class].discard(host)
                    self.saved(self.avoided)

    def crashed(self, run: Run, job_class: JobClass | None, why: str, at: float,
                crashed_size: tuple[str, int] | None) -> None:
        hosts = run.alloc.host_names
        refused = sorted({r.host for r in run.ranks.values() if (r.reason or "").startswith(LAUNCH_REFUSED)})
        if len(hosts) > 1 and len(refused) == 1:
            hosts = tuple(refused)  # its agent would not start the rank there: the fault is that host's
        if run.reports > 0 or len(hosts) != 1 or job_class is None:
            return  # it ran, or the fault could be on any of its hosts
        size = (run.alloc.gpu_type, run.alloc.num_gpus)
        self.crashes.setdefault(hosts[0], []).append(EarlyCrash(at, run.job_id, job_class, size, why, crashed_size))
        self.avoided.setdefault(job_class, set()).add(hosts[0])
        self.avoided_by.setdefault((job_class, hosts[0]), set()).add(run.job_id)
        self.saved(self.avoided)

    def job_failed(self, job_id: str) -> None:
        """A job that failed for good died of its own fault: the hosts only its crashes keep its
        class off are given back. A failed job with a typo'd script kept a sweep of its model and
        batch off an idle host, new submissions too, while it lived on in the store."""
        changed = False
        for (job_class, host), jobs in list(self.avoided_by.items()):
            jobs.discard(job_id)
            if not jobs:
                del self.avoided_by[(job_class, host)]
                if host in self.avoided.get(job_class, ()):
                    self.avoided[job_class].discard(host)
                    changed = True
        if changed:
            self.saved(self.avoided)

    def avoid(self, job_class: JobClass | None, hosts: dict[str, str] | None = None,
              gpu_types: tuple[str, ...] = ()) -> set[str]:
        """The hosts the class keeps off; none when that would leave it no host of ``hosts``
        (name -> GPU type) of its ``gpu_types``: a job that dies everywhere is its own fault,
        and is retried until it fails rather than waiting for ever."""
        avoid = set(self.avoided.get(job_class, ())) if job_class is not None else set()
        if hosts is not None and not any(h not in avoid and type_allowed(t, gpu_types) for h, t in hosts.items()):
            return set()
        return avoid

    def broken(self) -> dict[str, list[EarlyCrash]]:
        """Hosts the rule above finds broken, with their evidence."""
        return {host: crashes for host, crashes in self.crashes.items()
                if len({c.job_class for c in crashes}) >= EVIDENCE_CLASSES and self.peers(host, crashes)}

    def peers(self, host: str, crashes: list[EarlyCrash]) -> list[tuple[EarlyCrash, str]]:
        """(crash, another host where its job ran on the same GPU type at the same count, and has
        not crashed at once since)."""
        out = []
        for c in crashes:
            other = sorted(h for h, t, n in self.job_ran_on.get(c.job_id, ()) if h != host and (t, n) == c.size
                           and not any(p.job_id == c.job_id for p in self.crashes.get(h, ())))
            if other:
                out.append((c, other[0]))
        return out

    def hosts_ran(self, job_class: JobClass | None) -> set[str]:
        """The hosts where runs of the class reported progress."""
        return {h for h, _, _ in self.ran_on.get(job_class, ())} if job_class is not None else set()

    def forgive_class(self, job_class: JobClass) -> set[str]:
        """An updated spec (command, workdir, env) may be the fix: the class's runs may go back to
        the hosts they died on (a job fixed and retried had its hosts marked "keep off" for good)."""
        hosts = self.avoided.pop(job_class, set())
        if hosts:
            self.saved(self.avoided)
        return hosts

    def forget(self, host: str) -> None:
        self.crashes.pop(host, None)
        for hosts in self.avoided.values():
            hosts.discard(host)  # drained: nothing goes there anyway, and once back it is fixed
        self.saved(self.avoided)


def stored_health(store: Store) -> HostHealth:
    """A HostHealth that keeps ``avoided`` in ``store``, starting from what it holds there for
    the classes of live jobs (unreadable: nothing is avoided, and a class may crash once more)."""
    def save(avoided: dict[JobClass, set[str]]) -> None:
        keep = _live_classes(store)
        store.set_setting(AVOIDED, json.dumps([[m, b, sorted(hosts)] for (m, b), hosts in sorted(avoided.items())
                                               if hosts and (m, b) in keep]))

    return HostHealth(avoided=live_avoided(store), saved=save)


def _live_classes(store: Store) -> set[JobClass]:
    return {(rec.job.spec.model, rec.job.spec.batch_size) for rec in store.jobs(include_terminal=False)}


def live_avoided(store: Store) -> dict[JobClass, set[str]]:
    """The hosts each class of a live job keeps off, as the store holds them: a class with no
    live job is forgotten (what a controller starts from, and what ``status`` names)."""
    keep = _live_classes(store)
    return {c: hosts for c, hosts in stored_avoided(store).items() if c in keep}


def stored_avoided(store: Store) -> dict[JobClass, set[str]]:
    """The hosts each class keeps off, as the store holds them (unreadable: none)."""
    try:
        rows = json.loads(store.setting(AVOIDED) or "[]")
        return {(str(m), int(b)): {str(h) for h in hosts} for m, b, hosts in rows}
    except (ValueError, TypeError):
        return {}


def keep_off_crash_hosts(inputs: list[JobInput], cluster: ClusterView, health: HostHealth,
                         classes: dict[str, JobClass], ready: Iterable[HostStatus] = ()) -> list[JobInput]:
    """Each job's plan input with the hosts its class crashed on at once left out (as pinned
    hosts: the others), unless the user pinned hosts or the others cannot hold the job.

    ``ready``: every ready host, busy ones too. Counted from the hosts with a free GPU only, the
    others "could not hold" a job while the good host was busy profiling, and the job went back
    to the broken host: with none of the others free, it now waits (held) for them.
    """
    out = []
    free = {h.name for h in cluster.hosts}
    hosts = [(h.name, h.gpu_type, h.gpu_count, h.drained) for h in cluster.hosts] + [
        (s.name, s.gpu_type, len(s.gpus), False) for s in ready if s.state is HostState.READY and s.name not in free]
    for job in inputs:
        avoid = health.avoid(classes.get(job.id))
        room: dict[str, int] = {}
        for name, gpu_type, count, drained in hosts:
            if name not in avoid and not drained and gpu_type and type_allowed(gpu_type, job.gpu_types):
                room[gpu_type] = room.get(gpu_type, 0) + count
        if avoid and not job.constraints.pinned_hosts and max(room.values(), default=0) >= job.min_gpus:
            others = tuple(h.name for h in cluster.hosts if h.name not in avoid)
            pinned = replace(job.constraints, pinned_hosts=others) if others else replace(job.constraints, held=True)
            job = replace(job, constraints=pinned)
        out.append(job)
    return out


def describe(host: str, crashes: list[EarlyCrash], health: HostHealth) -> str:
    jobs = sorted({c.job_id for c in crashes})
    crash, peer = health.peers(host, crashes)[0]
    return (f"{host} drained as broken: runs of {', '.join(jobs)} died there before their first progress report "
            f"(last: {crashes[-1].why}), while {crash.job_id}'s ran on {peer} ({crash.size[1]}x{crash.size[0]} "
            "there too); their crashes there do not count. Fix the host, then put it back in service (d on the "
            f"Cluster screen, or heet-tui hosts undrain {host})")


def drain_broken_hosts(ctl: Controller) -> None:
    """Drain each host the rule finds broken, once, and forgive the crashes it caused."""
    health, store = ctl.executor.health, ctl.store
    for host, crashes in health.broken().items():
        health.forget(host)
        if host in ctl.drained():
            continue  # drained already: nothing more goes there
        now = ctl.clock()
        message = describe(host, crashes, health)
        set_drained(store, host, True, message)
        store.add_event(now, "drained", message, None, host)
        ctl.notices.append(message)
        for crash in crashes:
            forgive(ctl.executor, crash, host, now)


def forgive(executor: Executor, crash: EarlyCrash, host: str, now: float) -> None:
    store, job_id = executor.store, crash.job_id
    store.forgive_crash(job_id)
    executor.backoff_until.pop(job_id, None)
    if crash.crashed_size is not None and crash.crashed_size in executor.crashed_sizes.get(job_id, ()):
        executor.crashed_sizes[job_id].discard(crash.crashed_size)
        save_crashed_sizes(store, executor.crashed_sizes)
    rec = store.job(job_id)
    if rec is not None and rec.job.state is JobState.QUEUED and job_id not in executor.runs:
        store.try_set_state(job_id, JobState.QUEUED, now, f"crashed on {host}, which was drained as broken (not "
                            "counted); waiting for a plan")
