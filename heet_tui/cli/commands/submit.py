"""``heet-tui submit JOB.toml [JOB.toml ...]``: queue jobs; a running controller picks them up at
its next round.

Several specs (a sweep: ``heet-tui submit sweep/*.toml``) are checked first and queued together
or not at all, so a typo in the seventh file does not leave six jobs running and the rest to
sort out by hand.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.printable import printable
from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_hints import submit_hints
from heet_tui.config.job_spec import load_job_specs, spec_file, spec_files
from heet_tui.control.checkpoint_dirs import CheckpointDirInUse, resumed_from
from heet_tui.control.hosts_choice import chosen_hosts_path
from heet_tui.control.store import Store
from heet_tui.core.job import Job


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit jobs (job.toml files) to the queue")
    add_location_options(p)
    p.add_argument("specs", metavar="JOB.toml|DIR|'GLOB'", nargs="+",
                   help="job spec files, a directory of them or a quoted glob; all are checked before any is queued, "
                   "and a bad one queues none")
    p.add_argument("--json", action="store_true", help="print each new job as a JSON object, one per line")
    p.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        paths = spec_files(args.specs)
        specs, origins, problems = load_job_specs(paths)
    except ConfigError as exc:  # a directory without job files
        raise UsageError(str(exc)) from None
    if problems:  # counted in files: a directory given holds many
        raise UsageError("\n".join(problems) + _nothing_queued(len(problems), len(paths)))
    store = open_store(args, create=True)
    now = time.time()
    earlier = [store.checkpoint_users(s.checkpoint_dir) if s.checkpoint_dir else [] for s in specs]
    files = [spec_file(path) for path in origins]
    try:
        jobs = store.add_jobs(specs, now, files)
    except CheckpointDirInUse as exc:
        raise UsageError(exc.located(origins[exc.index], specs[exc.index].name)
                         + _nothing_queued(1, len(specs))) from None
    for file, job in zip(files, jobs, strict=True):
        store.add_event(now, "submit", f"submitted {job.id} from {file}", job.id)
    warnings = _warnings(args, store, origins, jobs)
    for hint, ids in warnings.items():  # kept with each job: the terminal's scrollback goes by
        for job_id in ids:
            store.add_event(now, "warning", f"at submit: {hint}", job_id)
    if args.json:
        for job, users in zip(jobs, earlier, strict=True):
            resumes = resumed_from(users)
            hints = [hint for hint, ids in warnings.items() if job.id in ids]
            # resubmitted: said in words without --json ("cnn was submitted before: this one is cnn-2"), and
            # nothing told a script it had made a copy
            print(json.dumps({"id": job.id, "name": job.spec.name, "state": job.state.value,
                              "resubmitted": job.id != job.spec.name,
                              **({"resumes_from": resumes.job_id} if resumes else {}),
                              **({"warning": "; ".join(hints)} if hints else {})}))
        return 0
    for job, users in zip(jobs, earlier, strict=True):
        spec = job.spec
        print(f"submitted {job.id} ({spec.gpu_range}, target "
              f"{spec.target.describe()})")
        if resumes := resumed_from(users):
            print(f"note: {printable(spec.checkpoint_dir)} holds the checkpoint of job {resumes.job_id} "
                  f"({resumes.state.value}, {resumes.samples_done:g} samples done): {job.id} resumes from it")
    # said: the ids to cancel them by ("cancel small-cnn" is the first, whose id it is); update picks the newest
    given = {j.id for j in jobs}
    if renamed := [j for j in jobs if j.id != j.spec.name and j.spec.name not in given]:
        names = list(dict.fromkeys(j.spec.name for j in renamed))
        print(f"note: {_ids(names)} {'was' if len(names) == 1 else 'were'} submitted "
              f"before: {'this one is' if len(renamed) == 1 else 'these are'} {_ids([j.id for j in renamed])}")
    for name in dict.fromkeys(j.spec.name for j in jobs if j.id != j.spec.name and j.spec.name in given):
        # not "submitted before": three specs named alike in one submit were said to be
        print(f"note: several specs here are named {name}: they are "
              f"{_ids([j.id for j in jobs if j.spec.name == name])}")
    for note in _twin_notes(store, jobs):
        print(f"note: {note}")
    for hint, ids in warnings.items():
        print(printable(f"warning: {hint}" if len(ids) == len(jobs) else f"warning ({_ids(ids)}): {hint}"))
    return 0


def _nothing_queued(bad: int, total: int) -> str:
    return f"\nnothing submitted: {bad} of the {total} specs cannot be queued" if total > 1 else ""


def _warnings(args: argparse.Namespace, store: Store, origins: list[Path], jobs: list[Job]) -> dict[str, list[str]]:
    """Each warning once, with the jobs it is about: a sweep of twenty specs made the same way
    would otherwise print it twenty times."""
    hosts = hosts_file(args, store)
    found: dict[str, list[str]] = defaultdict(list)
    for path, job in zip(origins, jobs, strict=True):
        for hint in submit_hints(job.spec, path, hosts):
            found[hint].append(job.id)
    return found


def _twin_notes(store: Store, jobs: list[Job]) -> list[str]:
    """One note per class (same model and batch size) that the new jobs share measurements in."""
    new_ids = {j.id for j in jobs}
    classes: dict[tuple[str, int], list[str]] = defaultdict(list)
    for j in jobs:
        classes[(j.spec.model, j.spec.batch_size)].append(j.id)
    notes = []
    for (model, batch), ids in classes.items():
        earlier = [r.job.id for r in store.jobs() if r.job.id not in new_ids and r.job.spec.model == model
                   and r.job.spec.batch_size == batch]
        if not earlier and len(ids) < 2:
            continue
        who = "they share" if len(ids) == 1 else f"{_ids(ids)} share"
        as_ = f", as {earlier[0]}" + (f" and {len(earlier) - 1} more" if len(earlier) > 1 else "") if earlier else ""
        notes.append(f"model {model} at batch {batch}{as_}: {who} throughput measurements (a new model key keeps "
                     f"{'it' if len(ids) == 1 else 'one'} apart)")
    return notes


def _ids(ids: list[str]) -> str:
    return ", ".join(ids) if len(ids) <= 3 else f"{', '.join(ids[:2])} and {len(ids) - 2} more"


def hosts_file(args: argparse.Namespace, store: Store):
    """The hosts file a controller of this store last ran on, else the one given or found; a file
    that does not load is the controller's to report, not the submitter's."""
    try:
        return load_hosts(chosen_hosts_path(getattr(args, "hosts", None), store.dir)[0])
    except (ConfigError, OSError):
        return None
