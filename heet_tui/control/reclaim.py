"""Taking back a checkpoint a job left behind on a host that was out of reach.

Seen twice over SSH: a host dropped out with a job's only checkpoint; after its grace period the
job started again elsewhere from an older one (or from none: it could not be copied off the host),
and when the host came back, its checkpoint, far ahead (its cut-off copy had even trained on), was
written over by the newer run's: 1,010 and 3,200 steps trained again. Now, when the host is back
and its checkpoint is well ahead of where the job is, the job goes on from it: a running job is
stopped and starts again with that checkpoint brought over; a queued one takes it at its launch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.control.checkpoint_copy import needs_copy
from heet_tui.control.launch import checkpoint_dir

if TYPE_CHECKING:
    from heet_tui.control.execution import Executor
    from heet_tui.control.store import Store

MIN_GAIN_STEPS = 20  # a restart costs its pause: worth it for this many steps at least,
MIN_GAIN_SHARE = 0.05  # and this share of the steps the checkpoint holds


def reclaim_left_behind(executor: Executor, store: Store, host: str, now: float) -> set[str]:
    """``host`` is back and has reported its jobs (a cut-off copy there fenced, with how far it
    got): the jobs that go on from the checkpoints left on it."""
    ck, taken = executor.checkpoints, set[str]()
    left = [(job_id, step) for job_id, (where, step) in ck.left_behind().items() if where == host]
    if executor.read_only or not left:  # a watching controller changes nothing: the next one weighs them
        return taken
    entries = {h.name: h for h in executor.hosts.hosts}
    for job_id, step in left:
        ck.forget_left_behind(job_id)
        rec = store.job(job_id)
        if rec is None or rec.job.state.terminal or host not in entries:
            continue
        at = rec.job.steps_done
        if step - at <= max(MIN_GAIN_STEPS, MIN_GAIN_SHARE * step):
            continue
        run = executor.runs.get(job_id)
        dst = entries.get(run.alloc.host_names[0]) if run is not None else None
        if dst is not None and not needs_copy(entries[host], dst, *(
                checkpoint_dir(job_id, rec.job.spec, e, store.store_id, rec.checkpoint) for e in (entries[host], dst))):
            continue  # the same directory: the newer run's checkpoint is the one there
        store.add_event(now, "checkpoint", f"host {host} is back with {job_id}'s checkpoint at step {step}, ahead of "
                        f"the {at} it is at: it goes on from there", job_id, host)
        # where it goes on from: plans made meanwhile counted its whole target again (0% done)
        store.update_progress(job_id, step, float(step * rec.job.spec.batch_size), None, current=True)
        executor.last_steps[job_id] = step  # its next launch resumes there: not "ahead of where it was"
        ck.remember(job_id, host)
        taken.add(job_id)
        if run is not None:
            ck.reclaiming[job_id] = (host, step)  # the run's end must not point it back at its own host
            if run.stop_reason is None:
                executor._spawn(executor.stop_run(run, f"its checkpoint on {host} is further (step {step})"))
    return taken
