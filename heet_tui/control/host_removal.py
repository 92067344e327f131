"""What removing a host from the hosts file does to the jobs running on it, in words.

``heet-tui hosts remove`` printed only that the host was removed, while the TUI's remove said
which jobs ran there and that they move off first: a script (or its reader) had no way to know
that a busy host stays until a plan moves its jobs, nor that with no controller running the
jobs are held where they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.store import Store

ON_GPUS = (JobState.RUNNING, JobState.RESIZING)


def jobs_on_host(store: Store, host: str) -> list[str]:
    """The jobs whose latest allocation, as the store has it, puts a process on ``host``."""
    found = []
    for rec in store.jobs(include_terminal=False):
        if rec.job.state in ON_GPUS and (last := store.last_allocation(rec.job.id)) is not None \
                and host in last[0].host_names:
            found.append(rec.job.id)
    return sorted(found)


def checkpoints_on_host(store: Store, host: str) -> list[str]:
    """The live jobs not running now whose latest checkpoint is on ``host``."""
    import json

    from heet_tui.control.checkpoint_dirs import HOSTS_SETTING

    where = json.loads(store.setting(HOSTS_SETTING) or "{}")
    return sorted(rec.job.id for rec in store.jobs(include_terminal=False)
                  if rec.job.state not in ON_GPUS and where.get(rec.job.id) == host)


def checkpoints_said(jobs: list[str], controller_running: bool) -> str:
    """What becomes of checkpoints a removed host holds; "" for none. A running controller keeps
    the host, drained, until each is copied to where its job starts next (hosts_reload.py)."""
    if not jobs:
        return ""
    named = f"It holds the checkpoint of {', '.join(jobs)}, not running now: "
    if controller_running:
        return named + "kept, drained, until it is copied to where the job starts next, then dropped."
    return named + ("no controller runs now; the next one keeps the host, drained, until it is copied to where "
                    "the job starts next, then drops it.")


def removal_said(jobs: list[str], controller_running: bool, auto_approve: bool) -> str:
    """What becomes of ``jobs`` once their host leaves the hosts file; "" for none.

    A running controller drains the host and drops it once they have moved (control/hosts_reload.py):
    at the next plan, or the next one approved without auto-approve. With none running, the host's
    entry is recorded for the next controller, which does the same (control/kept_hosts.py)."""
    if not jobs:
        return ""
    one = len(jobs) == 1
    named = f"It runs {', '.join(jobs)}: "
    if controller_running:
        return (named + f"drained first, {'it moves' if one else 'they move'} off at the next plan"
                f"{'' if auto_approve else ' you approve'}, then it is dropped.")
    return (named + f"no controller runs now to drain it; the next one keeps the host, drained, until "
            f"{'it moves' if one else 'they move'} off at the next plan{'' if auto_approve else ' you approve'}, "
            "then drops it.")
