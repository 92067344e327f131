"""A submitted job's spec changed in place (``heet-tui update JOB.toml``), keeping its id, place
in the queue, progress, measurements and checkpoint.

Before, a job submitted with ``max_gpus = 2`` that should have had 8, a target to extend, or a
command with a typo in one flag could only be cancelled and submitted again: a new id at the
back of the queue, and its history and crash count gone.

What the scheduler reads (GPU range and types, priority, stall timeout, stop grace) applies at
the next plan. What the processes were started with (command, arguments, workdir, env, target)
applies at their next launch, so a running job is stopped and relaunched from its checkpoint on
the GPUs it holds.
``model`` and ``batch_size`` name the measurements the job shares with its twins and
``checkpoint_dir`` holds its progress: those cannot change (submit a new job instead).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from heet_tui.config.job_hints import gpu_types_hint, missing_here, size_hint
from heet_tui.config.job_spec import spec_file
from heet_tui.control.drains import drained_hosts
from heet_tui.control.execution import StepFailed
from heet_tui.control.planning import outside_spec
from heet_tui.control.retry import RETRIED
from heet_tui.control.user_constraints import set_user_constraints, user_constraints
from heet_tui.core.host import HostState
from heet_tui.core.job import ACTIVE, JobSpec, JobState
from heet_tui.core.sched_input import Constraints

if TYPE_CHECKING:
    from heet_tui.config.hosts_file import HostsFile
    from heet_tui.control.controller import Controller
    from heet_tui.control.runtime import Run
    from heet_tui.control.store import Store
    from heet_tui.control.store_records import JobRecord

log = logging.getLogger(__name__)

UPDATED = "its spec was updated"
MEASURED = "its measurements are kept under its model and batch size"
FIXED = {"model": MEASURED, "batch_size": MEASURED, "checkpoint_dir": "its checkpoints are there"}
RELAUNCH = ("command", "workdir", "env", "target", "dataset_samples")  # what its processes were started with
ALL_FIELDS = RELAUNCH + ("min_gpus", "max_gpus", "gpu_types", "priority", "stall_timeout_s", "stop_grace_s")


def _shown(spec: JobSpec, field: str) -> str:
    value = getattr(spec, field)
    if field == "target":
        return spec.target.describe()
    if field == "command":
        return shlex.join(value)  # as `jobs NAME` shows it: "out/plain dir" read as two arguments
    if field == "gpu_types":
        return ", ".join(value) or "any"
    return "default" if value is None or value == "" else str(value)  # "workdir: /x -> " read as a bug


def spec_changes(old: JobSpec, new: JobSpec) -> list[str]:
    """What differs, as ``key: old -> new`` (the spec file's key names); ``env`` by its keys only."""
    return [_env_change(old, new) if field == "env" else
            f"{field.removesuffix('_s')}: {_shown(old, field)} -> {_shown(new, field)}"
            for field in ALL_FIELDS if getattr(old, field) != getattr(new, field)]


def _env_change(old: JobSpec, new: JobSpec) -> str:
    """Values are often tokens (HF_TOKEN, WANDB_API_KEY): printed, they went to scrollback, the
    store's events and controller.log."""
    before, after = dict(old.env), dict(new.env)
    parts = ([f"{k} added" for k in after.keys() - before.keys()] + [f"{k} removed" for k in before.keys() - after.keys()]
             + [f"{k} changed" for k in before.keys() & after.keys() if before[k] != after[k]])
    return f"env: {', '.join(sorted(parts))}"


def update_problem(old: JobSpec, new: JobSpec, state: JobState) -> str | None:
    """Why the job cannot take this spec, or None."""
    if state is JobState.DONE:
        return "it is done; submit it as a new job"
    for field, why in FIXED.items():
        if getattr(old, field) != getattr(new, field):
            return (f"{field} cannot change ({why}: {_shown(old, field)} -> {_shown(new, field)}); "
                    "cancel it and submit a new job")
    return None


class UpdateRefused(ValueError):
    def __init__(self, problems: list[str], several: bool) -> None:
        self.problems = problems + (["nothing updated"] if several else [])
        super().__init__("; ".join(self.problems))


def planned_updates(store: Store, specs: list[JobSpec], origins: list[Path], problems: list[str],
                    hosts: HostsFile | None = None) -> tuple[list[tuple[JobRecord, JobSpec, Path]], list[str]]:
    """The job each spec updates (the newest of its name), and the members of a sweep left alone
    because they have ended; :class:`UpdateRefused` naming every problem, ``problems`` (from
    reading the files) included: one bad file changes none."""
    found, ended = [], []
    for spec, path in zip(specs, origins, strict=True):
        rec = store.find_job(spec.name, ACTIVE, by_id=False)
        if rec is None:
            problems.append(f"{path}: no job named {spec.name!r} (heet-tui submit queues a new one)")
        elif rec.job.state.terminal and origins.count(path) > 1:
            # a sweep whose first members have finished: the rest take the change (a sweep with one
            # member done could not be updated at all)
            ended.append(f"{rec.job.id} has ended ({rec.job.state.value}): left as it was")
        elif (why := update_problem(rec.job.spec, spec, rec.job.state)) is not None:
            problems.append(f"{path}: job {rec.job.id}: {why}")
        elif (why := _relaunch_fails_here(store, rec, spec, hosts)
              or _strands(rec, spec, hosts, drained_hosts(store))) is not None:
            problems.append(f"{path}: job {rec.job.id}: {why}")
        else:
            found.append((rec, spec, path))
    swept = {path for _, _, path in found}
    problems += [f"{path}: every job of its sweep has ended; submit it as new jobs"
                 for path in dict.fromkeys(origins) if origins.count(path) > 1 and path not in swept
                 and not any(p.startswith(f"{path}: ") for p in problems)]
    if problems:
        raise UpdateRefused(problems, len(specs) + len(problems) > 1)
    return found, ended


def _relaunch_fails_here(store: Store, rec: JobRecord, spec: JobSpec, hosts: HostsFile | None) -> str | None:
    """Why relaunching a running job with ``spec`` would fail for certain: its script is missing on
    this machine, and every host it runs on is this machine (``transport = "local"``). An update
    with a typo in the script's name stopped a healthy job, which then crashed three times and
    failed. On other hosts the file may be there (another filesystem): that stays a warning."""
    if hosts is None or rec.job.state is not JobState.RUNNING or not needs_relaunch(rec.job.spec, spec):
        return None
    held = store.current_allocations().get(rec.job.id)
    missing = missing_here(spec) if held else None
    local = {h.name for h in hosts.hosts if h.transport == "local"}
    if missing is None or not set(held[0].host_names) <= local:
        return None
    return f"not updated: {missing}, and it runs on this machine, where its relaunch would fail"


def _strands(rec: JobRecord, spec: JobSpec, hosts: HostsFile | None, drained: set[str]) -> str | None:
    """Why a running job must not take a spec no host of the hosts file can hold, drained ones left
    out: the update stopped it (auto-approve moves jobs off GPUs their spec no longer allows) into
    a wait that no plan could ever end, where a warning had said only that it "waits until more
    are added" (drained hosts were counted, and it waited for someone to undrain one)."""
    if hosts is None or rec.job.state not in (JobState.RUNNING, JobState.RESIZING):
        return None
    usable = replace(hosts, hosts=tuple(h for h in hosts.hosts if h.name not in drained))
    why = size_hint(spec, usable) or gpu_types_hint(spec, usable)
    if why is None or (size_hint(rec.job.spec, usable) or gpu_types_hint(rec.job.spec, usable)):
        return None  # it could not be placed before either: the hosts file is what changed
    left_out = f" (drained, not counted: {', '.join(sorted(drained & {h.name for h in hosts.hosts}))})" \
        if drained & {h.name for h in hosts.hosts} else ""
    return (f"not updated: it runs now, and would be stopped for good: {why}{left_out}; add the hosts (or undrain "
            "them) first, or cancel it")


@dataclass(frozen=True, slots=True)
class Updated:
    """What an update did to one job, as its user is told."""

    job_id: str
    changes: tuple[str, ...]
    restarts: bool  # a running job whose processes restart from its checkpoint to take it
    moves: bool = False  # ... on GPUs a plan gives it: the ones it has are outside its new spec
    dropped: str = ""  # the Plan-screen edit the new spec rules out, dropped
    past_target: bool = False  # its new target is behind what it has trained: it ends, not restarts

    def __str__(self) -> str:
        if not self.changes:
            return f"{self.job_id}: nothing changed"
        how = ("; it is past its new target already: it stops, done," if self.past_target
               else "; it restarts from its checkpoint when a plan gives it GPUs its new spec allows" if self.moves
               else "; it restarts from its checkpoint" if self.restarts else "")
        return f"updated {self.job_id}: {'; '.join(self.changes)}" + how + self.dropped


def apply_update(store: Store, rec: JobRecord, spec: JobSpec, path: Path, now: float) -> Updated:
    """Store the new spec with an event."""
    job, changes = rec.job, tuple(spec_changes(rec.job.spec, spec))
    relaunch = needs_relaunch(job.spec, spec)
    if changes:
        file = spec_file(path)
        store.replace_spec(job.id, spec, relaunch, file)
        store.add_event(now, "update", f"updated {job.id} from {file}: {'; '.join(changes)}", job.id)
    running = job.state is JobState.RUNNING and not rec.cancel_requested  # a cancelled one restarts nowhere
    held = store.current_allocations().get(job.id)
    moves = running and held is not None and bool(outside_spec([(job.id, spec, held[0])]))
    past = running and job.samples_done >= spec.target_samples  # "it restarts", said of a job that then ended
    return Updated(job.id, changes, relaunch and running, moves, _drop_ruled_out_edit(store, job.id, spec, now),
                   past)


def _drop_ruled_out_edit(store: Store, job_id: str, spec: JobSpec, now: float) -> str:
    """An edit made on the Plan screen that the new spec rules out goes, said: a job fixed at 1 GPU
    by a tweak ran on at 1 after ``min_gpus = 2`` ("it restarts when a plan gives it GPUs its new
    spec allows"), and no plan ever came."""
    edit = user_constraints(store).get(job_id, Constraints())
    why = []
    if edit.fixed_count is not None and not spec.min_gpus <= edit.fixed_count <= spec.max_gpus:
        why.append(f"{edit.fixed_count} GPU(s) is outside {spec.min_gpus}-{spec.max_gpus}")
    if edit.pinned_type is not None and not spec.allows(edit.pinned_type):
        why.append(f"{edit.pinned_type} is not among gpu_types {', '.join(spec.gpu_types)}")
    if not why:
        return ""
    set_user_constraints(store, job_id, Constraints())
    said = f"; your edit on the Plan screen ({edit.describe()}) is dropped: {'; '.join(why)} of the new spec"
    store.add_event(now, "update", f"{job_id}: edit dropped ({edit.describe()}): the new spec rules it out", job_id)
    return said


def needs_relaunch(old: JobSpec, new: JobSpec) -> bool:
    return any(getattr(old, field) != getattr(new, field) for field in RELAUNCH)


async def follow_requests(ctl: Controller, active: list[JobRecord]) -> None:
    """What ``heet-tui cancel`` and ``update`` asked through the store, carried out.

    A running job takes a new spec at once for what the controller reads. One whose update changed
    what its processes were started with is stopped and relaunched from its checkpoint on the GPUs
    it has, without a plan: before, it was stopped and then waited, idle, for a plan someone had
    to approve. The request stays in the store until a launch carries it out (so a controller
    started after the update relaunches too); a run already being stopped relaunches with the new
    spec wherever the plan puts it.
    """
    ctl.store.log_others_events()
    relaunch = []
    for rec in active:
        if rec.cancel_requested:
            await ctl.intents.cancel(rec.job.id)
        elif (why := _fixed(rec)) and (hosts := ctl.executor.health.forgive_class(
                (rec.job.spec.model, rec.job.spec.batch_size))):
            # a sweep member's own bug kept every member off a host for good, the host blamed
            ctl.store.add_event(ctl.clock(), why, f"{rec.job.id}: {FIXED_BY[why]}, so it may run again on "
                                f"{', '.join(sorted(hosts))}, where a run of its model died at once", rec.job.id)
        elif (run := ctl.executor.runs.get(rec.job.id)) is not None:
            run.spec = rec.job.spec
            if rec.relaunch_requested and run.stop_reason is None and not outside_spec(
                    [(run.job_id, rec.job.spec, run.alloc)]) and all(
                    ctl.cluster.host_status(h).state is HostState.READY for h in run.alloc.host_names):
                relaunch.append(run)  # a host not (yet) connected: once it is, or once it is lost
    if relaunch and (ctl.applying is None or ctl.applying.done()):  # else after the plan being applied
        ctl.applying = asyncio.get_running_loop().create_task(_relaunch_in_place(ctl, relaunch))


FIXED_BY = {"update": "updated", "retry": "retried"}  # _fixed's answers, as an event says them


def _fixed(rec: JobRecord) -> str:
    """"update" or "retry" when a queued job was just given a new spec or queued again by hand,
    both what a user does once the script is fixed; "" otherwise."""
    if rec.job.state is not JobState.QUEUED:
        return ""
    if rec.relaunch_requested:
        return "update"
    return "retry" if rec.job.message.startswith(RETRIED) else ""


async def _relaunch_in_place(ctl: Controller, runs: list[Run]) -> None:
    """Held as the controller's ``applying`` task, so no plan moves these jobs meanwhile."""
    ex = ctl.executor
    try:
        await asyncio.gather(*(ex.stop_run(run, UPDATED) for run in runs))
        for run in runs:
            rec = ctl.store.job(run.job_id)
            if (rec is None or rec.cancel_requested or rec.job.state is not JobState.QUEUED
                    or run.job_id in ex.runs or ex.backoff_until.get(run.job_id, 0.0) > ctl.clock()):
                continue  # cancelled, finished or crashed on the way out: not this function's to restart
            try:
                new = await ex.launch(run.job_id, run.alloc)
                if new.any_exited:
                    raise StepFailed("a rank exited at launch")
            except Exception as exc:  # noqa: BLE001 - any failure leaves it queued for the next plan
                log.warning("relaunching %s after its update: %s", run.job_id, exc)
                ctl.notices.append(f"{run.job_id}: not relaunched on {run.alloc.describe()} after its update "
                                   f"({exc}); the next plan places it")
    finally:
        ctl.poke()
