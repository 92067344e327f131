"""What a crashed run leads to: a retry after a growing pause, or the job's failure.

A size the job never ran at that crashed before its first report is left out of later plans
(out of memory at a larger size is the usual cause), so the retry is not the same crash again.
"""

from __future__ import annotations

from heet_tui.control.crash_hints import refused_for_good
from heet_tui.control.crashed_sizes import (
    crashed_where_its_class_runs,
    new_size_that_crashed,
    save_crashed_sizes,
)
from heet_tui.control.job_log import fail_with_log_tail, say_crash
from heet_tui.control.remembered import remembered_auto_approve
from heet_tui.control.runtime import STALLED, Run, backoff_s
from heet_tui.control.stalls import BUFFERED, NONE_SEEN
from heet_tui.core.job import JobState


def after_crash(executor, run: Run, why: str) -> None:
    store, job_id, now = executor.store, run.job_id, executor.clock()
    if why.startswith(STALLED) and why.find(NONE_SEEN) >= 0 and run.progress:
        # "no progress report ... (none since its launch)" beside a last log line of step 1030
        why, run.buffered_said = f"{why}; {BUFFERED}", True
    hosts_ran = executor.health.hosts_ran(executor.book.classes.get(job_id))
    if (size := new_size_that_crashed(run, executor.book, hosts_ran)) is not None:
        executor.crashed_sizes.setdefault(job_id, set()).add(size)
        save_crashed_sizes(store, executor.crashed_sizes)
        store.add_event(now, "crashed", f"{job_id}: {size[1]}x{size[0]} crashed before its first report, "
                        "a size it never ran at: plans leave it out", job_id)
    elif executor.crashed_sizes.get(job_id) and crashed_where_its_class_runs(run, executor.book, hosts_ran):
        cleared = sorted(executor.crashed_sizes.pop(job_id))
        save_crashed_sizes(store, executor.crashed_sizes)
        store.add_event(now, "crashed", f"{job_id}: {run.alloc.num_gpus}x{run.alloc.gpu_type} crashed before its "
                        "first report too, a size its class runs at: the job itself is the cause, not "
                        f"{', '.join(f'{n}x{t}' for t, n in cleared)}, which plans use again", job_id)
    crashes = store.count_crash(job_id)
    if crashes > executor.opt.max_retries or refused_for_good(why):
        executor._spawn(fail_with_log_tail(executor, run, why, crashes))
        return
    wait = backoff_s(crashes, executor.opt.retry_backoff_s)
    executor.backoff_until[job_id] = now + wait
    retry = f"retry {crashes}/{executor.opt.max_retries}"
    if not run.profiling and not remembered_auto_approve(store):
        retry += " in a plan for you to approve"  # manual mode: nothing restarts it by itself
    store.try_set_state(job_id, JobState.QUEUED, now, f"{why}; {retry} in {wait:.0f} s")
    executor._spawn(say_crash(executor, run, why, f"{retry} in {wait:.0f} s"))
