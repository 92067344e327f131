"""Which new jobs the controller profiles in a round, and on which GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.control.unmeasured import unmeasured_ids
from heet_tui.core.host import HostState
from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller


async def profile_new_jobs(ctl: Controller) -> None:
    """Profile each new job on up to ``profile_types`` GPU types, one GPU each, all at once.

    Types go to the jobs that have the fewest measurements on them so far, so that across
    jobs every pair of types gets compared and the estimate for a type a job was not
    profiled on can borrow the ratio seen on other jobs. A job whose profiling measured
    nothing is not profiled again (``control/unmeasured.py``).
    """
    if not ctl.opt.profile:
        return
    executor, book = ctl.executor, ctl.book
    busy = executor.busy_gpus()
    drained = ctl.drained()
    skip = unmeasured_ids(ctl.store)
    coverage: dict[str, int] = {}
    for job_id in {o[0] for o in ctl.store.observations()} | set(executor.profiles):
        types = book.measured_types(job_id) | {r.alloc.gpu_type for r in executor.profiles.get(job_id, [])}
        for t in types:
            coverage[t] = coverage.get(t, 0) + 1
    for rec in ctl.store.jobs(include_terminal=False):
        job = rec.job
        if (job.state is not JobState.QUEUED or job.id in executor.profiles or job.id in executor.runs
                or job.id in skip or book.measured(job.id) or executor.backoff_until.get(job.id, 0) > ctl.clock()):
            continue
        options: dict[str, tuple[str, int]] = {}
        for status in ctl.cluster.status():
            if status.state is not HostState.READY or status.name in drained or not status.gpus:
                continue
            if status.gpu_type in options or not job.spec.allows(status.gpu_type):
                continue
            free = [g.index for g in status.gpus if g.index not in busy.get(status.name, set())]
            if free:
                options[status.gpu_type] = (status.name, free[0])
        chosen = sorted(options, key=lambda t: coverage.get(t, 0))[: ctl.opt.profile_types]
        for t in chosen:
            host, gpu = options[t]
            busy.setdefault(host, set()).add(gpu)
            coverage[t] = coverage.get(t, 0) + 1
        if chosen:
            await executor.start_profiling(job.id, [options[t] for t in chosen])
