"""The sizes (GPU type, count) a job cannot run at, learnt from launches that crashed at once.

Plans leave these sizes out for the job and its twins. They are kept in the store, so a
restarted controller does not spend a retry finding out again.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING

from heet_tui.control.runtime import LAUNCH_REFUSED, Run
from heet_tui.control.scaling_rule import parse_placement

if TYPE_CHECKING:
    from heet_tui.control.store import Store
    from heet_tui.control.throughput import ThroughputBook


def new_size_that_crashed(run: Run, book: ThroughputBook,
                          hosts_ran: Collection[str] | None = None) -> tuple[str, int] | None:
    """(GPU type, count) of a run that crashed before it reported anything, at a size the job
    has no measurement for; None otherwise.

    A job that trained at other sizes and dies at once at a new one most likely cannot run at
    that size (a global batch the script will not split that way, memory that does not hold
    the larger local batch): the same plan would only crash it again until it failed. A crash
    after progress, or at a size it ran at before, says nothing about the size. Nor does one on a
    host where the job's class never ran (``hosts_ran``: where it did): a host without torch made
    2xT4 "a size it never ran at" for good, and a job of the class waited beside 4 free T4s.
    """
    size = _crashed_at(run, book, hosts_ran)
    return None if size is None or size in _sizes_run(run.job_id, book) else size


def crashed_where_its_class_runs(run: Run, book: ThroughputBook, hosts_ran: Collection[str] | None = None) -> bool:
    """A crash before the first report at a size its class ran at, on a host it ran on: the job's own
    script is the cause (a typo in its arguments), so the sizes it crashed at before were not. A
    job whose command had a typo crashed at 2xA100 and 2xV100, and a healthy twin was kept to one
    A100 for good beside the other, idle."""
    size = _crashed_at(run, book, hosts_ran)
    return size is not None and size in _sizes_run(run.job_id, book)


def _crashed_at(run: Run, book: ThroughputBook, hosts_ran: Collection[str] | None) -> tuple[str, int] | None:
    """The size of a run that died before its first report for a reason of its own, else None."""
    if run.profiling or run.reports > 0 or not book.measured(run.job_id):
        return None
    if any(r.reason and r.reason.startswith(LAUNCH_REFUSED) for r in run.ranks.values()):
        return None  # never started (a workdir or command missing on a host): says nothing of the size
    if hosts_ran is not None and not set(run.alloc.host_names) <= set(hosts_ran):
        return None  # the host is as likely the cause: host_health keeps the class off it
    return (run.alloc.gpu_type, run.alloc.num_gpus)


def _sizes_run(job_id: str, book: ThroughputBook) -> set[tuple[str, int]]:
    return {(t, sum(parse_placement(k))) for t, k in book.measured(job_id)}


CRASHED_SIZES = "crashed_sizes"  # store setting: job -> [[type, count], ...] plans leave out


def load_crashed_sizes(store: Store) -> dict[str, set[tuple[str, int]]]:
    """The sizes jobs crashed at on launch, as the last controller left them (a restarted one
    tried each such size once more, a retry lost). Unreadable, it is empty: a size is retried."""
    try:
        raw = json.loads(store.setting(CRASHED_SIZES) or "{}")
        return {str(job): {(str(t), int(n)) for t, n in sizes} for job, sizes in raw.items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def save_crashed_sizes(store: Store, sizes: dict[str, set[tuple[str, int]]]) -> None:
    live = {rec.job.id for rec in store.jobs(include_terminal=False)}
    store.set_setting(CRASHED_SIZES, json.dumps({j: sorted(s) for j, s in sorted(sizes.items()) if j in live}))
