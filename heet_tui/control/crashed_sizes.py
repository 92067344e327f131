"""The sizes (GPU type, count) a job cannot run at, learnt from launches that crashed at once.

Plans leave these sizes out for the job and its twins. They are kept in the store, so a
restarted controller does not spend a retry finding out again.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING

from heet_tui.control.runtime import LAUNCH_REFUSED, Run
from heet_tui.control.throughput import parse_placement

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
    measured = book.measured(run.job_id)
    if run.profiling or run.reports > 0 or not measured:
        return None
    if any(r.reason and r.reason.startswith(LAUNCH_REFUSED) for r in run.ranks.values()):
        return None  # never started (a workdir or command missing on a host): says nothing of the size
    if hosts_ran is not None and not set(run.alloc.host_names) <= set(hosts_ran):
        return None  # the host is as likely the cause: host_health keeps the class off it
    size = (run.alloc.gpu_type, run.alloc.num_gpus)
    return None if size in {(t, sum(parse_placement(k))) for t, k in measured} else size


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
