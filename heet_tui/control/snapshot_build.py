"""The Snapshot the UI renders, assembled from the store, the executor and the cluster's view."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from heet_tui.control.drains import drain_reasons
from heet_tui.control.restart_costs import cost_of, ended_twin_costs, restart_costs
from heet_tui.control.runtime import foreign_gpus
from heet_tui.control.scaling_rule import parse_placement
from heet_tui.control.stalls import quiet_note
from heet_tui.control.user_constraints import user_constraints
from heet_tui.core.allocation import Allocation, placement_key
from heet_tui.core.durations import duration
from heet_tui.core.job import JobState, TargetKind
from heet_tui.core.sched_input import Constraints
from heet_tui.core.snapshot import JobProfile, JobStatus, ProfileCell, Snapshot
from heet_tui.scheduling.registry import POLICY_NAMES

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.runtime import Run

PROFILE_COUNTS = (1, 2, 4)
OTHER_STORE = "(another state store)"  # who holds a GPU that a process of another store runs on


def _progress(spec, steps: int, samples: float) -> float:
    t = spec.target
    if t.kind is TargetKind.STEPS:
        return min(1.0, steps / t.value) if t.value else 0.0
    if t.kind is TargetKind.SAMPLES:
        return min(1.0, samples / t.value) if t.value else 0.0
    total = t.value * spec.dataset_samples
    return min(1.0, samples / total) if total else 0.0


def build_snapshot(ctl: Controller) -> Snapshot:
    now, ex = ctl.clock(), ctl.executor
    runs = ex.runs
    drained = ctl.drained()
    gpu_jobs: dict[str, list[tuple[int, str]]] = {}
    for run in ex.all_runs():
        for r in run.ranks.values():
            if not r.exited:
                gpu_jobs.setdefault(r.host, []).extend((g, run.job_id) for g in r.gpus)
    for host, gpus in foreign_gpus(ctl.cluster, ctl.store.store_id, ex.newer_copies).items():  # left running
        gpu_jobs.setdefault(host, []).extend((g, OTHER_STORE) for g in gpus)
    why = drain_reasons(ctl.store) | ctl.hosts_reloader.why
    hosts = tuple(replace(s, drained=s.name in drained, gpu_jobs=tuple(sorted(gpu_jobs.get(s.name, ()))),
                          drained_why=why.get(s.name, "") if s.name in drained else "")
                  for s in _in_file_order(ctl.cluster.status(), ctl.hosts.names()))
    events_by_job: dict[str, list[str]] = {}
    for e in ctl.store.events(limit=200):
        if e.job_id:
            events_by_job.setdefault(e.job_id, []).append(f"{e.kind}: {e.message.splitlines()[0] if e.message else ''}")
    jobs, profiles = [], []
    records = ctl.store.jobs(ended=SHOWN_ENDED)
    shown_ended = Counter(r.job.state for r in records if r.job.state.terminal)
    hidden_ended = tuple((state, n - shown_ended[state]) for value, n in sorted(ctl.store.state_counts().items())
                         if (state := JobState(value)).terminal and n > shown_ended[state])
    restart_cost, ended_cost, edits = restart_costs(ctl.store), ended_twin_costs(ctl.store), user_constraints(ctl.store)
    away = ex.checkpoints.away([r for r in records if not r.job.state.terminal and r.job.id not in runs],
                               ctl.hosts.hosts, hosts)
    # finished jobs keep their heat map too (what was measured is worth seeing), but only the
    # most recent few: predicting every cell of every old job on each snapshot would not scale
    recent_done = {r.job.id for r in [r for r in records if r.job.state.terminal][-RECENT_DONE_PROFILES:]}
    pending = ctl.store.plan(ctl.pending_plan_id) if ctl.pending_plan_id else None
    for rec in records:
        job, run = rec.job, runs.get(rec.job.id)
        rate = float(run.progress.get("samples_per_s", 0.0)) if run and run.progress else 0.0
        progress = _progress(job.spec, job.steps_done, job.samples_done)
        remaining, quiet = None, (run and ctl.host_grace.note({r.host for r in run.ranks.values()}, now)
                                  or quiet_note(run, job.spec, now, ex.opt.stall_timeout_s))
        if rate > 0 and job.state is JobState.RUNNING and quiet is None:  # a silent job's ETA would be a guess
            total = job.samples_done / progress if progress > 0 else None
            remaining = (total - job.samples_done) / _steady(ctl, run, rate) if total else None
        elif job.state is JobState.QUEUED and run is None:  # quiet_note is None without a run
            remaining, quiet = _queued_prediction(ctl, job.id, job.message, now)
        jobs.append(JobStatus(
            id=job.id, name=job.spec.name, state=job.state, model=job.spec.model,
            allocation=run.alloc if run else None, progress=progress, throughput=rate, eta_s=remaining,
            restarts=job.restarts, submitted_at=job.submitted_at, min_gpus=job.spec.min_gpus,
            max_gpus=job.spec.max_gpus, message=quiet or job.message, log_tail=ex.log_tails.get(job.id, ()),
            events=tuple(events_by_job.get(job.id, [])[-10:]),
            restart_s=cost_of(job.id, restart_cost, ctl.book.class_mates(job.id), None,
                              ended_cost.get((job.spec.model, job.spec.batch_size))),
            ended_at=job.ended_at, metrics=job.metrics, spec_file=rec.spec_file,
            edit=edits.get(job.id, Constraints()), gpu_types=job.spec.gpu_types,
            checkpoint_away=away.get(job.id, ""),
        ))
        if not job.state.terminal or job.id in recent_done:
            planned = pending.plan.allocations.get(job.id) if pending and pending.status == "proposed" else None
            profiles.append(_profile(ctl, job.id, job.spec, hosts, run.alloc if run else None, planned))
    applying = ctl.applying_plan_id()
    return Snapshot(
        now=now, hosts=hosts, jobs=tuple(jobs),
        plan=pending.plan if pending and pending.status == "proposed" else None,
        plan_id=pending.id if pending and pending.status == "proposed" else None,
        profiles=tuple(profiles), policy=ctl.policy_name, auto_approve=ctl.auto_approve, mode="controller",
        read_only=ctl.opt.read_only,
        applying_plan=applying,
        applying_restarts=_restarts(ctl, applying),
        interval_s=ctl.opt.interval_s,
        viewers=ctl.attach_server.viewers,
        held_why=ctl.not_auto_approved,
        notices=tuple(ctl.notices[-20:]), notices_at=tuple(ctl.notices.times[-20:]), notices_total=ctl.notices.total,
        hidden_ended=hidden_ended,
        store_error=ctl.store_health.error or "",
        policies=POLICY_NAMES,
        profiles_hidden=sum(r.job.state.terminal and r.job.id not in recent_done for r in records)
        + sum(n for _, n in hidden_ended),
    )


def _restarts(ctl: Controller, plan_id: int | None) -> int | None:
    """How many running jobs the plan being applied stops, resizes or moves: one that only starts
    queued jobs read "jobs stop, save a checkpoint and start again" on the Plan screen."""
    rec = ctl.store.plan(plan_id) if plan_id is not None else None
    return sum(c.needs_restart for c in rec.plan.changes) if rec is not None else None


def _queued_prediction(ctl: Controller, job_id: str, message: str, now: float) -> tuple[float | None, str | None]:
    """A job the latest plan leaves waiting: its predicted time to completion, and its message
    with the predicted start added (the store's message has no countdown: waiting.py)."""
    made = ctl.plan_made
    pred = made.predictions.get(job_id) if made and job_id in made.weighed else None
    if pred is None:
        return None, None
    elapsed = now - (made.plan.effect.at or now)
    done = None if pred.completion_s is None else max(0.0, pred.completion_s - elapsed)
    if job_id in made.plan.allocations:  # the pending plan starts it: its ETA there (the Plan screen's)
        return (done, None) if made.plan_id is not None and made.plan_id == ctl.pending_plan_id else (None, None)
    if pred.starts_in_s is None:
        return None, None
    start = max(0.0, pred.starts_in_s - elapsed)
    return done, f"{message} (predicted start on {pred.starts_on} in ~{duration(start)})"


RECENT_DONE_PROFILES = 10


def _steady(ctl: Controller, run: Run, latest: float) -> float:
    """The rate an ETA is read at: the run's recent mean (its last few observations, ten seconds
    apart), else the latest report. From each report alone, the ETA of a job on a busy machine
    jumped between 54 s and 15 minutes from one snapshot to the next; from the cell's mean, a
    faster profiling run on it made the ETA 30% shorter than the throughput beside it said."""
    steady = ctl.book.running_mean(run.job_id, run.alloc.gpu_type, placement_key(run.alloc.placement), run.started_at)
    return steady if steady else latest


SHOWN_ENDED = 500  # ended jobs in a snapshot, latest first; `heet-tui jobs` lists them all


def _profile(ctl: Controller, job_id: str, spec, hosts, runs_on: Allocation | None = None,
             planned: Allocation | None = None) -> JobProfile:
    measured = ctl.book.measured(job_id)
    cells = [ProfileCell(t, k, v, True) for (t, k), v in sorted(measured.items())]
    types = sorted({h.gpu_type for h in hosts if h.gpu_type and spec.allows(h.gpu_type)})
    largest = {t: max(len(h.gpus) for h in hosts if h.gpu_type == t) for t in types}
    for t in types:
        for n in PROFILE_COUNTS:
            key = placement_key((n,))
            # a one-host placement no host of the type can hold would only mislead
            if (t, key) in measured or n > spec.max_gpus or n > largest[t]:
                continue
            value, spread = ctl.book.estimate_with_spread(job_id, t, parse_placement(key))
            if value > 0:
                cells.append(ProfileCell(t, key, value, False, spread))
    shown = {(c.gpu_type, c.config) for c in cells}
    for alloc in (runs_on, planned):
        if alloc is None or alloc.num_gpus == 0 or (alloc.gpu_type, placement_key(alloc.placement)) in shown:
            continue
        value, spread = ctl.book.estimate_with_spread(job_id, alloc.gpu_type, alloc.placement)
        if value > 0:
            cells.append(ProfileCell(alloc.gpu_type, placement_key(alloc.placement), value, False, spread))
            shown.add((alloc.gpu_type, placement_key(alloc.placement)))
    return JobProfile(job_id, tuple(cells), _where(runs_on), _where(planned))


def _where(alloc: Allocation | None) -> tuple[str, str] | None:
    return (alloc.gpu_type, placement_key(alloc.placement)) if alloc and alloc.num_gpus else None


def _in_file_order(statuses, names: tuple[str, ...]) -> list:
    """As the hosts file lists them: a host added while running came last, and an edited one
    moved to the end of `status`, while the TUI kept the file's order. Hosts on their way out
    (removed from the file) follow."""
    place = {name: i for i, name in enumerate(names)}
    return sorted(statuses, key=lambda s: place.get(s.name, len(place)))
