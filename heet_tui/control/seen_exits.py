"""Generations whose rank 0 this controller saw end (its agent reported the exit).

A host that was cut off may come back with a copy that trained on, even to the job's end, and
what it says of it is taken (recovery.py, reclaim.py). That holds only for a copy nobody saw
end: a compromised host claimed that a generation the controller had itself stopped for a move,
and watched exit, had finished at the target; the job's real run elsewhere was stopped and the
job marked done. It claimed a checkpoint far ahead for such a generation too, and the job went
on from the host's planted files.
"""

from __future__ import annotations

import json

from heet_tui.control.store import Store

SETTING = "rank0_exits_seen"
PER_JOB = 32  # the latest generations kept per job
JOBS = 2000  # jobs kept; the oldest go first


def note_ended(store: Store, job_id: str, generation: int) -> None:
    seen = _read(store)
    gens = [g for g in seen.pop(job_id, []) if g != generation] + [generation]
    seen[job_id] = gens[-PER_JOB:]
    while len(seen) > JOBS:
        seen.pop(next(iter(seen)))
    store.set_setting(SETTING, json.dumps(seen))


def ended_seen(store: Store, job_id: str, generation: int) -> bool:
    return generation in _read(store).get(job_id, [])


def _read(store: Store) -> dict[str, list[int]]:
    try:
        seen = json.loads(store.setting(SETTING) or "{}")
    except ValueError:
        return {}
    return {k: [g for g in v if isinstance(g, int)] for k, v in seen.items() if isinstance(v, list)} \
        if isinstance(seen, dict) else {}
