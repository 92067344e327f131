"""The one verdict on a run whose last rank has ended: what the job becomes, and what is kept.

Split from ``execution.py`` so that the launching and stopping stay apart from the judging:
a run's end writes its restart pause, its unreported GPU time, where its checkpoint lies and
the job's next state in one store batch (``Executor._after_exit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.control.crashed_sizes import new_size_that_crashed
from heet_tui.control.host_loss import left_out_of_reach
from heet_tui.control.job_log import say_stop_warning
from heet_tui.control.profiling_rounds import finish_profiling_run
from heet_tui.control.restart_costs import stop_seconds
from heet_tui.control.runtime import (
    LAUNCH_REFUSED,
    NOT_LAUNCHED,
    RELAUNCHED,
    Outcome,
    Run,
    ended_unwatched,
    judge,
)
from heet_tui.control.stop_grace import grace_s, stop_warning
from heet_tui.control.unmeasured import unreported_gpu_s
from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.execution import Executor


def finish_run(ex: Executor, run: Run) -> None:
    rec = None if run.profiling else ex.store.job(run.job_id)
    outcome, why = judge(run, rec.job.spec if rec is not None else None, rec.job if rec is not None else None)
    job_id, now = run.job_id, ex.clock()
    ended = run.ended_at(rec.job.history[-1][0] if rec is not None and rec.job.history else 0.0, now)
    if (stop_s := stop_seconds(run, now)) is not None:
        ex.store.add_restart_time(job_id, "stop", stop_s, now)
    if (stop_s is not None or (run.stop_reason or "").startswith("host")) and \
            stop_warning(run, grace := grace_s(run.spec, ex.opt.stop_grace_s)) is not None:
        ex._spawn(say_stop_warning(ex, run, grace, now))  # after its log's last line is read
    if outcome is Outcome.CRASHED:
        job_class = ex.book.classes.get(job_id)
        ex.health.crashed(run, job_class, why, now,
                          new_size_that_crashed(run, ex.book, ex.health.hosts_ran(job_class)))
    if run.profiling:
        finish_profiling_run(ex, run, outcome, why, now)
        return
    if ex.runs.get(job_id) is run:
        del ex.runs[job_id]
    if unreported := unreported_gpu_s(run, ended):
        ex.store.update_progress(job_id, 0, 0.0, None, unreported)
    # rank 0 wrote the latest checkpoint, in HEET_CHECKPOINT_DIR there, whether or not its progress
    # lines name it: a script that did not was moved between hosts with its checkpoint left behind
    back = ex.checkpoints.reclaiming.pop(job_id, None)  # a further checkpoint elsewhere (reclaim.py)
    ex.last_steps.update({job_id: back[1]} if back else {})  # where its next launch goes on from
    # (a run found running after a restart trained there too, even if stopped before it reported again)
    # not a run stopped because a cut-off copy had finished the job: that copy's checkpoint is the job's
    if (rank0 := run.ranks.get(0)) is not None and rec is not None and not back \
            and rec.job.state is not JobState.DONE \
            and (rec.checkpoint or run.reports or run.found_at_restart) \
            and not (rank0.reason or "").startswith((LAUNCH_REFUSED, NOT_LAUNCHED)):  # one never started wrote none
        ex.checkpoints.remember(job_id, rank0.host)
    ex.store.release_allocation(job_id, ended)
    said = f"{job_id} generation {run.generation}: {why}{ended_unwatched(now - ended)}"
    ex.store.add_event(now, outcome.value, said, job_id)
    if outcome is Outcome.DONE:
        ex.store.try_set_state(job_id, JobState.DONE, ended, why)
    elif outcome is Outcome.STOPPED and run.stop_reason == "cancel":
        unreached = left_out_of_reach(run.alloc.host_names, ex.cluster.status())
        ex.store.try_set_state(job_id, JobState.CANCELLED, ended, f"cancelled{unreached}")
    elif outcome is Outcome.STOPPED and run.stop_reason in RELAUNCHED:
        pass  # the plan step relaunches it at once
    elif outcome in (Outcome.STOPPED, Outcome.INTERRUPTED):
        step = back[1] if back else rec.job.steps_done if rec else 0
        where = f"the checkpoint on {back[0]}" if back else "its checkpoint"
        # a stop that could not reach a hung host: the run trains on there while the job starts anew
        unreached = left_out_of_reach(run.alloc.host_names, ex.cluster.status()) if outcome is Outcome.STOPPED else ""
        ex.store.try_set_state(job_id, JobState.QUEUED, now, f"{why}{unreached}; resumes from {where} (step {step})")
    else:
        ex.crashed(run, why)

