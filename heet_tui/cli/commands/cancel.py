"""``heet-tui cancel NAME [NAME ...]``: cancel jobs, whether or not a controller is running.

A name is a job id, else a job name (its newest job), or a shell-style pattern over the active jobs'
ids (``'sweep-*'``, quoted so the shell leaves it alone). A name that matches nothing cancels
nothing at all: a typo in a list should not leave half of it running unnoticed. A name whose jobs
have all ended is no typo: beside names that do match, it is said and the rest is cancelled.

The request is written to the store. A queued job is cancelled at once when no controller
runs; a running job needs its processes stopped, which the controller does at its next round
(or when it next starts).
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from collections.abc import Callable, Collection

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.names import is_pattern, known_names
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store
from heet_tui.core.job import ACTIVE, Job, JobState


def register(sub: argparse._SubParsersAction) -> None:
    add_names_command(sub, "cancel", "cancel jobs by name, id or pattern ('sweep-*')", cmd_cancel, ended=False)


def add_names_command(sub: argparse._SubParsersAction, name: str, help: str, func, ended: bool) -> None:
    """A command over job names (``resolve_jobs``): cancel takes active jobs, retry ended ones."""
    p = sub.add_parser(name, help=help)
    add_location_options(p, reads_hosts=False)
    p.add_argument("names", metavar="NAME", nargs="+", help="a job id, else a job name (its newest job), or a quoted "
                   f"pattern over the {'ended' if ended else 'active'} jobs' ids")
    p.set_defaults(func=func)


def cmd_cancel(args: argparse.Namespace) -> int:
    store = open_store(args)
    jobs = resolve_jobs(store, args.names)
    pid = controller_running(store.dir)
    for job in jobs:
        _cancel(store, job, pid)
    return 0


def resolve_jobs(store: Store, names: list[str], ended: bool = False, verb: str = "cancelled",
                 states: tuple[JobState, ...] | None = None, keep: Callable[[Job], bool] | None = None,
                 kind: str | None = None) -> list[Job]:
    """The jobs the names mean, each once, in the order named; a name that means none is an
    error and nothing is done. Patterns match the active jobs' ids (the ended ones' with
    ``ended``), in ``states`` if given and that ``keep`` keeps: ``retry 'sweep-*'`` leaves the
    sweep's finished jobs be."""
    pool = [r.job for r in store.jobs(include_terminal=ended) if r.job.state.terminal == ended
            and (states is None or r.job.state in states) and (keep is None or keep(r.job))]
    found: dict[str, Job] = {}
    missing, settled = [], []
    everyone = [r.job for r in store.jobs(include_terminal=True)]
    for name in names:
        matched = _named(store, name, pool, states or ACTIVE, keep)
        if not matched:
            # a name whose jobs all exist in a state this verb leaves alone is no typo: the rest goes on
            # (`cancel 'h*' 'cnn-*'` cancelled nothing because the cnn jobs had ended)
            # a pattern's too: nothing to do, not a usage error (a nightly `retry 'sweep-*'` with nothing
            # failed exited 2, where `cancel NAME` of a cancelled job exits 0)
            elsewhere = [j for j in _named(store, name, everyone) if j.id not in {p.id for p in pool}]
            (settled if elsewhere and (len(names) > 1 or is_pattern(name)) else missing).append((name, elsewhere))
        found.update((j.id, j) for j in matched)
    if not missing:
        for name, jobs in settled:
            states_of = " or ".join(sorted({j.state.value for j in jobs}))
            print(f"heet-tui: {name}: its {len(jobs)} job(s) are {states_of}: none to be {verb}", file=sys.stderr)
    missing = [name for name, _ in missing]
    if missing:
        # "ended jobs: none" beside two done ones: retry lists the failed or cancelled
        kind = kind or ("active" if not ended else " or ".join(s.value for s in states) if states else "ended")
        known = known_names([j.id for j in pool], missing[0], f"{kind} jobs")
        what = " or ".join(f'"{m}"' for m in missing)
        elsewhere = [j for j in _named(store, missing[0], everyone) if j.id not in {p.id for p in pool}]
        if elsewhere:  # they exist, in a state this verb leaves alone: say so, not "no job"
            states_of = sorted({j.state.value for j in elsewhere})
            what += f" that can be {verb}"
            known = (f"it names {len(elsewhere)} {' or '.join(states_of)} job(s): "
                     f"{', '.join(j.id for j in elsewhere[:5])}{' ...' if len(elsewhere) > 5 else ''}")
        raise UsageError(f"no job {what} ({known})"
                         + (f"; nothing {verb}" if len(names) > 1 else ""))
    return list(found.values())


def _named(store: Store, name: str, pool: list[Job], states: Collection[JobState] | None = None,
           keep: Callable[[Job], bool] | None = None) -> list[Job]:
    """What ``name`` means: the jobs of ``pool`` a pattern matches, or the one job it names (one
    ``keep`` refuses gives way to the newest of its name in ``pool``: retry cnn, done at its target,
    means cnn-2, cancelled)."""
    if is_pattern(name):
        return [j for j in pool if fnmatch.fnmatchcase(j.id, name)]
    rec = store.find_job(name, states)
    if rec is not None and keep is not None and not keep(rec.job) and (ended := rec.job.ended_at) is not None:
        # as find_job: only to one of its name submitted after it ended (the same spec again)
        if kept := [j for j in pool if j.spec.name == name and j.submitted_at > ended]:
            return [kept[-1]]
    return [rec.job] if rec else []


def sibling_in(store: Store, job: Job, states: Collection[JobState], verb: str) -> str:
    """" (sweep-3-2, of the same name, is running: cancel it by that id)": what a name given as an
    id was once taken to mean (the same spec submitted again), said instead of done."""
    same = [r.job for r in store.jobs() if r.job.spec.name == job.spec.name and r.job.id != job.id
            and r.job.state in states]
    if not same:
        return ""
    return f" ({same[-1].id}, of the same name, is {same[-1].state.value}: {verb} it by that id)"


def _cancel(store: Store, job: Job, pid: int | None) -> None:
    if job.state.terminal:
        print(f"{job.id} is already {job.state.value}{sibling_in(store, job, ACTIVE, 'cancel')}")
        return
    store.request_cancel(job.id)
    now = time.time()
    store.add_event(now, "cancel", f"cancel requested for {job.id}", job.id)
    if pid is None and job.state in (JobState.QUEUED, JobState.PROFILING) and not store.current_allocations().get(job.id):
        store.set_state(job.id, JobState.CANCELLED, now, "cancelled")
        print(f"cancelled {job.id}")
    elif pid is None:
        print(f"cancel of {job.id} recorded; it is {job.state.value}, so its processes stop when the "
              "controller next runs (heet-tui run)")
    else:
        print(f"cancelling {job.id}: the controller (pid {pid}) stops it at its next round")
