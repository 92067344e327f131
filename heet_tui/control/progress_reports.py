"""Progress reports that need more than recording: another rank's, an unreadable line, a speed
unlike its twins', and progress made while no controller watched. Each becomes an event or a
store update once."""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING, Any

from heet_agent.progress import MAX_PROBLEM_KINDS, problem_kind

from heet_tui.control.runtime import EXIT_DONE, STALLED, RankProc, Run
from heet_tui.control.stalls import BUFFERED, NONE_SEEN
from heet_tui.core.allocation import placement_key
from heet_tui.core.host import HostState
from heet_tui.core.metrics import training_metrics

if TYPE_CHECKING:
    from heet_tui.cluster.events import JobProgressError
    from heet_tui.control.execution import Executor
    from heet_tui.control.store import Store

BAD_PROGRESS = "a @heet-progress line is not a progress line"
SETTLED = 0.15  # two successive profiling rates this close: its warm-up is over
PROFILE_MAX_REPORTS = 5  # a profiling run that never settles is measured by its median after this many


def observe(executor: Executor, run: Run, rate: float, now: float) -> None:
    """A measured speed of the run's configuration, for the scheduler (the book) and the store."""
    run.observed_at = now
    source = "profiling" if run.profiling else "running"
    executor.book.add(run.job_id, run.alloc.gpu_type, run.alloc.placement, rate, source, now)
    executor.store.add_observation(run.job_id, run.alloc.gpu_type, placement_key(run.alloc.placement), rate, now,
                                   source)
    warn_unlike_twins(executor, run, now)


def note_profiling_rate(run: Run, rate: float, least_reports: int) -> bool:
    """Keep a profiling run's latest rate (its first report is start-up: left out), and say
    whether the run has now measured what it was for.

    Its second report was taken as the job's speed there, but a job's speed still climbs for a
    few reports after start-up (allocator and kernel warm-up, a DataLoader's prefetch): on the
    bundled hosts one such second report (4,846/s) was a sixth of the speed the same run settled
    at, and the plans believed the slower GPU type the faster. Now it runs until two successive
    rates agree within ``SETTLED``, or ``PROFILE_MAX_REPORTS`` came.
    """
    if run.reports > 1:
        run.rates.append(rate)
    r = run.rates
    if run.reports < least_reports or not r:
        return False
    return _agree(r) or run.reports >= max(least_reports, PROFILE_MAX_REPORTS)


def profiled_rate(rates: list[float]) -> float:
    """The settled speed: the mean of the two rates that agree, else the median of all."""
    return (rates[-1] + rates[-2]) / 2 if _agree(rates) else statistics.median(rates)


def _agree(rates: list[float]) -> bool:
    return len(rates) >= 2 and abs(rates[-1] - rates[-2]) <= SETTLED * max(rates[-1], rates[-2])


def note_other_rank_progress(store: Store, run: Run, rank: int, now: float) -> None:
    """Progress is rank 0's alone; a run whose other ranks report too gets one event saying so.

    A script that ignores ``WORLD_SIZE`` runs a whole copy of the training on every GPU it is
    given, each printing its own progress: counted together, they made the job's steps jump
    back and forth between the copies while the GPUs did the same work N times over.
    """
    if run.other_rank_reported:
        return
    run.other_rank_reported = True
    store.add_event(now, "warning", f"{run.job_id}: rank {rank} prints progress lines too; only rank 0's count. "
                    f"If the script ignores WORLD_SIZE, each of the {run.alloc.num_gpus} GPUs runs a whole copy "
                    "of the training (docs/TRAINING.md)", run.job_id)


def warn_unlike_twins(executor: Executor, run: Run, now: float) -> None:
    """Twins share throughput numbers on the strength of their spec's model key; one that
    measures far from them, running at the same time, is most likely another model under a
    copied key (said once per job).

    Not on emulated GPUs: they all train on the login node's few cores, so their speeds follow
    how many trainings share those cores, not the model (a six-job sweep on ``make run``'s
    config warned twins at 1.51x as jobs around them finished)."""
    if executor.hosts is not None and executor.hosts.emulated_names() & set(run.alloc.host_names):
        return
    key = placement_key(run.alloc.placement)
    ratio = (None if (run.job_id, "twins") in executor.warned
             else executor.book.unlike_twins(run.job_id, run.alloc.gpu_type, key, now))
    if ratio is None:
        return
    executor.warned.add((run.job_id, "twins"))
    model, batch = executor.book.classes[run.job_id]
    executor.store.add_event(now, "warning", f"{run.job_id} runs at {ratio:.2f}x the speed of its twins (model "
                             f"{model}, batch {batch}) on {run.alloc.describe()}; they share throughput numbers, so if "
                             "it is another model, give it a model key of its own", run.job_id)


def note_bad_progress(executor: Executor, bad: JobProgressError, now: float) -> None:
    """A progress line the agent could not read: one event per job and kind of problem, naming why.

    Such lines were dropped without a word; a script that printed ``str()`` of a dict was
    marked "unmeasured" for printing no progress lines, although it printed hundreds. Said once
    for all kinds, that warning hid a later wild step, after which every good line was refused.
    """
    found, store = executor.find(bad.host, bad.job_id, bad.generation), executor.store
    if found is None:
        return
    job_id = found[0].job_id
    said = [problem_kind(e.message) for e in store.events(job_id, limit=200) if BAD_PROGRESS in e.message]
    if len(said) >= MAX_PROBLEM_KINDS or any(problem_kind(f"{BAD_PROGRESS} ({bad.error}), so") in m for m in said):
        return
    store.add_event(now, "warning", f"{job_id}: {BAD_PROGRESS} ({bad.error}), so it is not counted: {bad.line} "
                    "(docs/TRAINING.md, Progress lines)", job_id)


def note_lost_progress(store: Store, run: Run, progress: dict[str, Any], last_steps: dict[str, int],
                       now: float) -> None:
    """A launch whose first report is behind the step the job's previous launch had reported
    resumed from an older checkpoint, or from none: say how much is trained again.

    Seen on the local config: a resize's SIGTERM killed a script's DataLoader workers, its main
    process raised inside its step before it saved, and the next launch started from step 0.
    The job's row kept showing step 600 (the store kept the furthest step; it now shows where the
    launch is) and nothing said 600 steps were being trained again. Compared with
    the previous launch's last report, not the furthest step: after one such loss, every later
    relaunch would be behind the furthest. A restarted controller compares with the step the store
    holds (the last launch's last report it saw): it had said nothing when a host lost while it was
    down took a job's checkpoint with it and the relaunch started from step 0. An adopted run was
    not relaunched: it does not warn. Call it before this report is stored.
    """
    note_buffered(store, run)
    step = int(progress["step"])  # checked by the agent (heet_agent.progress), as on_progress reads it too
    previous = last_steps.get(run.job_id)
    if previous is None and run.reports == 1 and run.start_samples is not None:
        rec = store.job(run.job_id)
        previous = rec.job.steps_done if rec is not None and rec.job.steps_done > 0 else None
    last_steps[run.job_id] = step
    if run.reports == 1 and run.start_samples is not None and previous is not None and step > 2 * previous + 100 \
            and step - previous > 1.5 * _steps_it_could_train(run, progress, now) + 100:
        # another job's checkpoint, most likely: a relative path two jobs wrote (it read c3's at 560 after 70)
        store.add_event(now, "warning", f"{run.job_id} resumed ahead of where it was: generation {run.generation} "
                        f"reports step {step}, and its last launch had reached step {previous}. It loaded a "
                        "checkpoint that is not its own (one at a relative path, or in a directory another job "
                        f"writes too?): about {step - previous} steps count as trained that it never trained; "
                        "give it its own checkpoint_dir, or HEET_CHECKPOINT_DIR (docs/TRAINING.md)", run.job_id)
        return
    if run.reports != 1 or run.start_samples is None or previous is None or step >= previous:
        return
    recent = store.events(run.job_id, limit=30)
    launches = [i for i, e in enumerate(recent) if e.kind == "launch"]
    since = recent[launches[-2] if len(launches) > 1 else 0:launches[-1] if launches else len(recent)]
    # the copy of the checkpoint to this launch's rank-0 host, failed since the previous launch
    # (checkpoint_hosts.py): one from an earlier move was quoted for a crash after it
    rank0 = run.alloc.hosts[0][0] if run.alloc.hosts else None  # plan_launch puts rank 0 on the first
    copy = next((e.message for e in reversed(since) if e.kind == "checkpoint" and " failed: " in e.message
                 and f" -> {rank0}:" in e.message), None)
    # the previous launch's host lost: it was blamed on the script ("a crash, or ... does not resume")
    lost = next((e.message for e in reversed(since) if e.kind == "host-lost"), None)
    why = (f"Its checkpoint could not be brought to this host ({copy.split(': ', 1)[-1]})" if copy else
           f"That launch's {lost.split(': ', 1)[-1]}, after its last checkpoint (or before its first)" if lost else
           "That launch ended after its last checkpoint (a crash, or a stop that saved none: DataLoader workers "
           "killed by SIGTERM, docs/TRAINING.md), or the script does not resume")
    store.add_event(now, "warning", f"{run.job_id} resumed behind where it was: generation {run.generation} reports "
                    f"step {step}, and its last launch had reached step {previous}, so about {previous - step} steps "
                    f"are trained again. {why}", run.job_id)


def _steps_it_could_train(run: Run, progress: dict[str, Any], now: float) -> float:
    """Steps the launch could have trained by now at its reported speed: a script whose first line
    came late (one printed only when stopped, after 3,194 silent steps) was said to have loaded
    "a checkpoint that is not its own"."""
    try:
        rate, batch = float(progress.get("samples_per_s") or 0), run.spec.batch_size if run.spec else 0
    except (TypeError, ValueError):
        return 0.0
    if not batch or not math.isfinite(rate) or rate <= 0:
        return 0.0
    return max(0.0, now - run.started_at) * rate / batch


def remember_exit_step(last_steps: dict[str, int], run: Run, rank: RankProc, progress: dict[str, Any] | None) -> None:
    """The step rank 0 printed last, from its agent's exit report: the agent forwards only the
    latest line of each poll, so a crash right after a line could leave the last one seen behind."""
    if run.profiling or rank.rank != 0 or not progress:
        return
    try:
        step = int(progress["step"])
    except (KeyError, TypeError, ValueError):
        return
    # what this launch reported is in last_steps only once it reported: else it is the previous one's
    last_steps[run.job_id] = max(step, last_steps.get(run.job_id, 0)) if run.reports else step


def record_unseen_progress(store: Store, run: Run, rank: RankProc, progress: dict[str, Any] | None) -> None:
    """Progress a run made while no controller watched, from its agent's report of it.

    A job that ran on, or ran to its end, while the controller was down was known by the step
    it had when the controller went: done at 300 of 300 steps, it showed "done 27%". An agent
    reports each job's latest progress line when it re-adopts the job or says it ended; rank
    0's counts (the store keeps the larger of what it had and this). Profiling runs train a
    scratch copy: their steps are not the job's.
    """
    if run.profiling or rank.rank != 0 or not progress:
        return
    try:
        step, samples, rate = int(progress["step"]), float(progress["samples"]), float(progress["samples_per_s"])
    except (KeyError, TypeError, ValueError):
        return
    if run.progress and float(run.progress.get("samples", 0) or 0) >= samples:
        return  # seen as it happened (a watched run's exit repeats its last line): nothing to record
    note_buffered(store, run)
    rec = store.job(run.job_id)
    unseen = max(0.0, samples - rec.job.samples_done) if rec else 0.0
    held_s = unseen / rate if rate > 0 and math.isfinite(rate) else 0.0  # the GPUs it held meanwhile count too
    checkpoint = progress.get("checkpoint")
    store.update_progress(run.job_id, step, samples, checkpoint if isinstance(checkpoint, str) else None,
                          held_s * run.alloc.num_gpus, metrics=training_metrics(progress))
    run.progress = progress


def done_beside_out_of_reach(executor: Executor, run: Run, rank: RankProc) -> None:
    """Rank 0 reached the target: ranks on hosts out of reach are counted ended with it. Seen: a
    job done on its rank-0 host stayed "running" while a peer's host was out of the hosts file,
    and "heet-tui cancel" would have made a finished job cancelled."""
    if rank.rank != 0 or rank.exit_code != EXIT_DONE:
        return
    ready = {s.name for s in executor.cluster.status() if s.state is HostState.READY}
    for peer in run.ranks.values():
        if not peer.exited and peer.host not in ready:
            executor._rank_exited(peer, None, None, f"lost: host {peer.host} out of reach when rank 0 finished")


def note_buffered(store: Store, run: Run) -> None:
    """Progress from a run stopped as hung with none seen before: its lines were buffered, and the
    stop flushed them. Said with the job's crash (crash_backoff), or here when they came later:
    over SSH the exit was handled first, and the hint was never given."""
    why = run.stop_reason or ""
    if not (why.startswith(STALLED) and NONE_SEEN in why) or run.buffered_said:
        return
    run.buffered_said = True
    rec = store.job(run.job_id)
    if rec is not None and BUFFERED not in rec.job.message and rec.job.message.startswith(STALLED):
        store.try_set_state(run.job_id, rec.job.state, time.time(), f"{rec.job.message}; {BUFFERED}"[:500])
    store.add_event(time.time(), "warning", f"{run.job_id} generation {run.generation}: {BUFFERED}", run.job_id)
