"""Which jobs the controller profiles in a round, and on which GPUs.

New jobs get a profiling round (``profile_new_jobs``). A job measured only on some types gets
one run on a type it has no estimate for when that type has GPUs nobody uses
(``profile_idle_types``). What an ended run means for its job: ``finish_profiling_run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.control import planning
from heet_tui.control.profiling_cost import record_profiling_run
from heet_tui.control.progress_reports import observe, profiled_rate
from heet_tui.control.runtime import Outcome, union_gpus
from heet_tui.control.unmeasured import MESSAGE as UNMEASURED
from heet_tui.control.unmeasured import mark_unmeasured, silent, unmeasured_ids
from heet_tui.control.waiting import why_waiting
from heet_tui.core.job import PLAN_WAITING, PROFILE_WAITING, TWIN_WAITING, Job, JobState
from heet_tui.core.sched_input import HostView

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.execution import Executor
    from heet_tui.control.runtime import Run


async def profile_new_jobs(ctl: Controller) -> None:
    """Profile each new job on up to ``profile_types`` GPU types, one GPU each, all at once.

    Types go to the jobs that have the fewest measurements on them so far, so that across
    jobs every pair of types gets compared and the estimate for a type a job was not
    profiled on can borrow the ratio seen on other jobs. A job whose profiling measured
    nothing is not profiled again (``control/unmeasured.py``), and one that no ready host can
    hold waits unprofiled: it took GPUs from jobs that could run, for a job that could not,
    and the hosts that will hold it may bring a type it was not measured on.

    Jobs of one profile class share their measurements (``ThroughputBook``), so a class is
    profiled through one of its jobs: a sweep of twelve twins took 24 runs' worth of GPUs to
    measure one thing twelve times. The others wait for that run; if it measures nothing,
    they are planned unmeasured with it.
    """
    if not ctl.opt.profile:
        return
    executor, book = ctl.executor, ctl.book
    skip = unmeasured_ids(ctl.store)
    # runs are single-GPU: a job that needs more (its model fits on no one GPU) crashed in every
    # round, each an attempt, and failed without running at its size; its own runs measure it
    new = [rec.job for rec in ctl.store.jobs(include_terminal=False)
           if rec.job.state is JobState.QUEUED and rec.job.spec.min_gpus == 1 and rec.job.id not in executor.profiles
           and rec.job.id not in executor.runs and rec.job.id not in skip and not book.measured(rec.job.id)
           and executor.backoff_until.get(rec.job.id, 0) <= ctl.clock()]
    if not new:
        return
    cluster = ctl.cluster_view(for_plans=False)
    new = _one_per_class(ctl, [job for job in new if why_waiting(job.spec, cluster) is None], skip)
    busy = executor.busy_gpus()
    ready = ready_hosts(ctl)
    coverage: dict[str, int] = {}
    for job_id in set(book.cells) | set(executor.profiles):  # in memory: the store's rows are many
        types = book.measured_types(job_id) | {r.alloc.gpu_type for r in executor.profiles.get(job_id, [])}
        for t in types:
            coverage[t] = coverage.get(t, 0) + 1
    for job in new:
        avoid = executor.health.avoid(book.classes.get(job.id), ready, job.spec.gpu_types)  # its class died there
        options = {t: where for t, where in idle_gpu_per_type(ctl, busy, avoid=avoid).items() if job.spec.allows(t)}
        chosen = sorted(options, key=lambda t: coverage.get(t, 0))[: ctl.opt.profile_types]
        for t in chosen:
            host, gpu = options[t]
            busy.setdefault(host, set()).add(gpu)
            coverage[t] = coverage.get(t, 0) + 1
        if chosen:
            await executor.start_profiling(job.id, [options[t] for t in chosen])
            continue
        types = "/".join(sorted({h.gpu_type for h in cluster.hosts if job.spec.allows(h.gpu_type)}))
        kept_off = sorted({host for t, (host, _) in idle_gpu_per_type(ctl, busy).items() if job.spec.allows(t)}
                          & avoid)
        waiting = f"{PROFILE_WAITING}no {types} GPU is idle (in use by jobs, or by processes heet did not start)"
        if kept_off:  # it said "no GPU is idle" beside an idle host the job's model keeps off
            where = f"on {kept_off[0]}, which jobs of its model keep off (their runs died there" if len(kept_off) == 1 \
                else f"on {', '.join(kept_off)}, which jobs of its model keep off (their runs died there"
            waiting = f"{PROFILE_WAITING}the idle {types} GPUs are {where} at once; see heet-tui status)"
        if job.message != waiting:  # it said nothing, and the Plan screen blamed the policy
            ctl.store.try_set_state(job.id, JobState.QUEUED, ctl.clock(), waiting)


def waits_for_profiling(ctl: Controller, job_id: str, has_run: bool) -> bool:
    """Whether planning leaves the job to a profiling round: its own, or, for a twin that has
    not run, its class's. Planned on the leader's first report, twins got a type whose run had
    not reported yet."""
    executor = ctl.executor
    if executor.in_profiling_round(job_id):
        return True
    return not has_run and not ctl.book.own(job_id) and any(
        executor.in_profiling_round(mate) for mate in ctl.book.class_mates(job_id))


def _one_per_class(ctl: Controller, new: list[Job], skip: set[str]) -> list[Job]:
    """The new jobs to profile now: one per profile class that nobody is profiling. The rest
    wait, saying for which run, or are unmeasured when a class-mate's runs measured nothing."""
    executor, book, now = ctl.executor, ctl.book, ctl.clock()
    profiling = {mate: job_id for job_id in executor.profiles if executor.in_profiling_round(job_id)
                 for mate in book.class_mates(job_id)}  # a side run measures a job its class has measured
    chosen: dict[object, Job] = {}
    for job in new:
        cls = book.classes.get(job.id, job.id)
        silent_mate = next((m for m in sorted(book.class_mates(job.id)) if m in skip), None)
        if silent_mate is not None:
            mark_unmeasured(ctl.store, job.id)
            ctl.store.try_set_state(job.id, JobState.QUEUED, now, f"{UNMEASURED} (as {silent_mate}, its twin)")
            ctl.store.add_event(now, "profile", f"{job.id}: not profiled: the profiling runs of its twin {silent_mate} "
                                "measured no throughput", job.id)
            continue
        leader = profiling.get(job.id) or (chosen[cls].id if cls in chosen else None)
        if leader is None:
            chosen[cls] = job
            continue
        waiting = TWIN_WAITING.format(leader)
        if job.message != waiting:
            ctl.store.try_set_state(job.id, JobState.QUEUED, now, waiting)
    return list(chosen.values())


def ready_hosts(ctl: Controller) -> dict[str, str]:
    """Name -> GPU type of the ready, undrained hosts, busy or not."""
    drained = ctl.drained()
    return {s.name: s.gpu_type for s in ctl.cluster.status()
            if s.state.value == "ready" and s.gpus and s.name not in drained}


def idle_gpu_per_type(ctl: Controller, busy: dict[str, set[int]], keep_free: dict[str, set[int]] | None = None,
                      avoid: set[str] | None = None) -> dict[str, tuple[str, int]]:
    """One (host, GPU) per GPU type that no run holds, on a ready, undrained host, among the GPUs
    the hosts file lets heet use; ``keep_free`` GPUs (a pending plan's) and ``avoid`` hosts are skipped."""
    return one_per_type(idle_hosts(ctl, busy, keep_free), avoid)


def idle_hosts(ctl: Controller, busy: dict[str, set[int]],
               keep_free: dict[str, set[int]] | None = None) -> list[HostView]:
    """The ready, undrained hosts with a GPU that no run holds and no pending plan hands out."""
    usable = {h.name: h.gpus for h in ctl.hosts.hosts}
    view = planning.cluster_view(ctl.cluster.status(), usable, ctl.drained(), union_gpus(busy, keep_free or {}))
    return [host for host in view.hosts if not host.drained]


def one_per_type(hosts: list[HostView], avoid: set[str] | None = None) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for host in hosts:
        if host.gpu_type not in out and host.name not in (avoid or ()):
            out[host.gpu_type] = (host.name, host.free[0])
    return out


async def profile_idle_types(ctl: Controller) -> None:
    """Measure a job on a GPU type it has no estimate for, on a GPU of that type nobody uses.

    A job profiled while a type was full (or while another job's ``gpu_types`` kept every
    comparison away) has no throughput on that type until some job is measured on both, and
    the policy never gives it that type: its GPUs sat idle while the job ran on 4 slow T4s.
    One short run on an idle GPU gives the estimate. At most one such run per round, none for a
    job whose twin is being measured (two twins of a sweep were profiled on a new host's two
    GPUs), and none on GPUs a plan awaiting approval hands out.
    """
    if not ctl.opt.profile:
        return
    executor, book = ctl.executor, ctl.book
    busy = executor.busy_gpus()
    pending = ctl.store.plan(ctl.pending_plan_id) if ctl.pending_plan_id else None
    keep_free = union_gpus(*({host: set(gpus)} for alloc in (pending.plan.allocations.values() if pending else ())
                             for host, gpus in alloc.hosts))
    hosts = idle_hosts(ctl, busy, keep_free)  # read once: nothing starts until the one run this round
    if not hosts:
        return
    skip = unmeasured_ids(ctl.store)
    now = ctl.clock()
    ready = ready_hosts(ctl)
    jobs = [r.job for r in ctl.store.jobs(include_terminal=False)
            if r.job.state in (JobState.RUNNING, JobState.QUEUED)]
    jobs.sort(key=lambda j: (j.state is not JobState.RUNNING, j.submitted_at))  # running jobs can move
    profiling = {book.classes.get(j, j) for j in executor.profiles}  # a twin's run measures the whole class
    for job in jobs:
        if (book.classes.get(job.id, job.id) in profiling or job.id in skip or not book.measured(job.id)
                or job.spec.min_gpus > 1
                or waits_for_profiling(ctl, job.id, job.id in executor.runs)
                or executor.backoff_until.get(job.id, 0) > now):
            continue
        avoid = executor.health.avoid(book.classes.get(job.id), ready, job.spec.gpu_types)
        idle = one_per_type(hosts, avoid)
        for gpu_type in sorted(idle):
            if (not job.spec.allows(gpu_type) or (job.id, gpu_type) in executor.side_profile_failed
                    or book.estimate(job.id, gpu_type, (1,)) > 0):
                continue
            await executor.start_profiling(job.id, [idle[gpu_type]], side=True)
            return


def profiling_message(runs: list[Run]) -> str:
    """A profiling job's message: where its short runs are (a run refused at launch is left out)."""
    where = [r.alloc.describe() for r in runs if not r.all_exited]
    if not where:
        return "profiling"
    if len(where) == 1:
        return f"profiling: a short run on {where[0]}; planned once it reports the job's speed"
    return f"profiling: short runs on {' and '.join(where)}; planned once they report the job's speed"


def side_profile_failed(executor: Executor, run: Run, crash: str) -> None:
    """A side run that measured nothing (it crashed, or reported no throughput) is not retried."""
    gpu_type, job_id = run.alloc.gpu_type, run.job_id
    executor.side_profile_failed.add((job_id, gpu_type))
    what = crash or "it reported no throughput"
    executor.store.add_event(executor.clock(), "profile", f"{job_id}: profiling on {gpu_type} measured nothing "
                             f"({what}); not tried again", job_id)


def finish_profiling_run(executor: Executor, run: Run, outcome: Outcome, why: str, now: float) -> None:
    """A profiling run ended: the job's round goes on, or ends profiled, unmeasured or crashed
    (a round that crashed counts as one attempt, however many of its runs crashed, and none when
    its other runs measured the job: the crash was the host's or the type's, kept off by host_health)."""
    job_id = run.job_id
    record_profiling_run(executor.store, run, now)
    if run.rates and run.observed_at is None:  # it ended before its speed settled: what it measured counts
        observe(executor, run, profiled_rate(run.rates), now)
    executor.last_profiled[job_id] = run
    runs = executor.profiles.get(job_id, [])
    if run in runs:
        runs.remove(run)
    if not runs:
        executor.profiles.pop(job_id, None)
    if run.side:  # the job's own state is not the run's to change
        if outcome is Outcome.CRASHED or silent(run):
            side_profile_failed(executor, run, why if outcome is Outcome.CRASHED else "")
        return
    if outcome is not Outcome.CRASHED and silent(run):
        executor.silent_profiles.add(job_id)
    if outcome is Outcome.CRASHED:
        executor.crashed_rounds.setdefault(job_id, (run, why))  # judged with the round
    if runs:
        return
    round_silent, crash = job_id in executor.silent_profiles, executor.crashed_rounds.pop(job_id, None)
    executor.silent_profiles.discard(job_id)
    measured = executor.book.measured(job_id)
    if crash is not None and not measured:
        executor.crashed(*crash)  # a round's runs together are one attempt
    elif round_silent and not measured:
        mark_unmeasured(executor.store, job_id)
        executor.store.try_set_state(job_id, JobState.QUEUED, now, UNMEASURED)
        executor.store.add_event(now, "profile", f"{job_id}: {UNMEASURED}", job_id)
    else:
        if crash is not None:  # measured on its other types: the job runs; the crash's host is kept off
            executor.store.add_event(now, "profile", f"{job_id}: profiling on {crash[0].alloc.describe()} crashed "
                                     f"({crash[1]}); not counted, as it measured elsewhere", job_id)
        executor.store.try_set_state(job_id, JobState.QUEUED, now, f"profiled; {PLAN_WAITING}")
        for mate in sorted(executor.book.class_mates(job_id)):
            rec = executor.store.job(mate)
            if rec and rec.job.state is JobState.QUEUED and rec.job.message == TWIN_WAITING.format(job_id):
                executor.store.try_set_state(mate, JobState.QUEUED, now, f"profiled as {job_id}; {PLAN_WAITING}")
