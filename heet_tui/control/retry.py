"""Queueing a failed or cancelled job again (``heet-tui retry``, the Jobs screen's ``r``).

A job that failed after its retries (a transient filesystem error, a bug fixed since in the
script, which hosts read at each launch) or that was cancelled by mistake had to be submitted
anew, as a new job that started from step 0 in a checkpoint directory of its own. Retried,
it keeps its id, its progress and its checkpoint, wherever that is.
"""

from __future__ import annotations

from heet_tui.control.store import Store
from heet_tui.control.store_records import JobRecord
from heet_tui.core.job import InvalidTransition

RETRIED = "retried by you"  # how a retried job's message starts until it runs (job_update.follow_requests)


def retry_job(store: Store, rec: JobRecord, now: float) -> str:
    """Queue it again; what to tell the user. ``ValueError`` says why it cannot be."""
    job = rec.job
    # a script that checkpoints by itself and names none in its progress lines (the key is
    # optional) was told "from the start", then resumed at step 560
    where = (f"from its last checkpoint (it had reached step {job.steps_done})" if rec.checkpoint
             else f"from what its script saved, if anything (it had reached step {job.steps_done}; its progress "
                  "lines named no checkpoint)" if job.steps_done
             else "from the start (it reported no checkpoint)")
    try:
        store.retry(job.id, now, f"{RETRIED} (it was {job.state.value}); resumes {where}")
    except InvalidTransition as exc:
        raise ValueError(str(exc)) from None
    store.add_event(now, "retry", f"{job.id} queued again (it was {job.state.value}); it resumes {where}", job.id)
    return f"{job.id} queued again; it resumes {where}"
