"""Runs that a newer copy of this state store started, remembered so that this one never takes
them for its own.

Copies of one state directory name the same store, so the processes each starts look alike on
the hosts (``job.r0.<store>``). After a copy's controller ran a job's generation 2, this one
launched its own generation 2 as well; at its next restart it read the copy's finished run as its
own ("finished while cut off": done at step 800, its own run at 420 stopped). A generation seen
that this store never launched is remembered here, and this store's next launch of the job goes
past it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from heet_tui.control.runtime import parse_agent_id
from heet_tui.control.store import Store
from heet_tui.core.job import Job

SETTING = "newer_copy_runs"
FIRST_SEEN = "newer_copy_unknown_jobs"  # job -> when a host first claimed a run of it, the store not having it
KEPT = 2000  # (job, generation) pairs; the oldest go first
BELIEVED_AHEAD = 64  # generations a newer copy of this store may be ahead of it; more is a false claim
MOST_BELIEVED = 1_000_000  # a remembered generation past this is a false claim: no job restarts that often


def _job_of(agent_id: str) -> str:
    return (parse_agent_id(agent_id) or ("",))[0]


def _pairs(store: Store) -> list[tuple[str, int]]:
    """The remembered (job, generation) pairs, oldest first; none when the setting is unreadable."""
    try:
        # a compromised host's claim of generation 2**31-1, remembered, made the job's next launch
        # 2**31: refused on the wire, the run hidden, and the honest host it ran on out for good
        return [(str(j), int(g)) for j, g in json.loads(store.setting(SETTING) or "[]") if 0 <= int(g) <= MOST_BELIEVED]
    except (ValueError, TypeError):
        return []


def remembered(store: Store) -> set[tuple[str, int]]:
    return set(_pairs(store))


def remember(store: Store, runs: Iterable[tuple[str, int]]) -> None:
    """``runs``: (agent id, generation) of processes a newer copy started."""
    known = _pairs(store)
    new = [pair for pair in dict.fromkeys((_job_of(a), g) for a, g in runs) if pair not in set(known)]
    if new:
        store.set_setting(SETTING, json.dumps((known + new)[-KEPT:]))


def highest(store: Store, job_id: str) -> int:
    """The newest generation of ``job_id`` a newer copy ran (0: none seen)."""
    return max((g for j, g in _pairs(store) if j == job_id), default=0)


def note_unknown_claims(store: Store, agent_ids: Iterable[str], now: float) -> None:
    """When a host first said it ran a job this store does not have (``agent_ids``)."""
    seen = _first_seen(store)
    new = {job: now for job in map(_job_of, agent_ids) if job and job not in seen and store.job(job) is None}
    if new:
        store.set_setting(FIRST_SEEN, json.dumps(dict(list({**seen, **new}.items())[-KEPT:])))


def _first_seen(store: Store) -> dict[str, float]:
    try:
        return {str(j): float(t) for j, t in json.loads(store.setting(FIRST_SEEN) or "{}").items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def runs_elsewhere(cluster, store: Store, newer: Iterable[tuple[str, str, int]], job: Job) -> bool:
    """A newer copy runs the job now (``newer``: (host, agent id, generation) seen, still running
    by what the agents last said): this store does not start it as well; two runs of one job
    trained side by side, and its launch on that host was refused ("generation 2 is still running
    here"). Once that run ends, the job is this store's to run again.

    Not a run a host claimed before the job was submitted here: any agent learns the store's id,
    and a compromised host claimed runs of names not yet submitted (``train``, ``sweep-0``), and
    held each such job queued for good as it came."""
    job_id = job.id
    claimed = _first_seen(store).get(job_id)
    if claimed is not None and claimed < job.submitted_at:
        return False
    its = {run for run in newer if _job_of(run[1]) == job_id}
    return any(j.running and (host, j.job_id, j.generation) in its
               for host in {h for h, _, _ in its} for j in cluster.jobs(host))
