"""``heet-tui cancel NAME``: cancel a job, whether or not a controller is running.

The request is written to the store. A queued job is cancelled at once when no controller
runs; a running job needs its processes stopped, which the controller does at its next round
(or when it next starts).
"""

from __future__ import annotations

import argparse
import time

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_state_option
from heet_tui.control.snapshots import controller_running
from heet_tui.core.job import JobState


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel a job by name or id")
    add_state_option(p, after_command=True)
    p.add_argument("name")
    p.set_defaults(func=cmd_cancel)


def cmd_cancel(args: argparse.Namespace) -> int:
    store = open_store(args)
    rec = store.find_job(args.name)
    if rec is None:
        known = ", ".join(r.job.id for r in store.jobs(include_terminal=False)) or "none"
        raise UsageError(f'no job "{args.name}" (active jobs: {known})')
    job = rec.job
    if job.state.terminal:
        print(f"{job.id} is already {job.state.value}")
        return 0
    store.request_cancel(job.id)
    now = time.time()
    store.add_event(now, "cancel", f"cancel requested for {job.id}", job.id)
    pid = controller_running(store.dir)
    if pid is None and job.state in (JobState.QUEUED, JobState.PROFILING) and not store.current_allocations().get(job.id):
        store.set_state(job.id, JobState.CANCELLED, now, "cancelled")
        print(f"cancelled {job.id}")
    elif pid is None:
        print(f"cancel of {job.id} recorded; it is {job.state.value}, so its processes stop when the "
              "controller next runs (heet-tui run)")
    else:
        print(f"cancelling {job.id}: the controller (pid {pid}) stops it at its next round")
    return 0
