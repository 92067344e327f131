"""``heet-tui update JOB.toml [JOB.toml ...]``: change submitted jobs' specs in place.

Each file's ``name`` picks the newest job of that name; it keeps its id, place in the queue,
progress and checkpoint (``heet_tui.control.job_update`` says what can change and when it
applies). Like ``submit``, every file is checked first and nothing changes when one is wrong.
"""

from __future__ import annotations

import argparse
import time

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.commands.submit import hosts_file
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.printable import printable
from heet_tui.config.errors import ConfigError
from heet_tui.config.job_hints import submit_hints
from heet_tui.config.job_spec import load_job_specs, spec_files
from heet_tui.control.job_update import UpdateRefused, apply_update, planned_updates
from heet_tui.control.snapshots import controller_running


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("update", help="change submitted jobs' specs in place (job.toml files, by name)")
    add_location_options(p)
    p.add_argument("specs", metavar="JOB.toml", nargs="+",
                   help="job spec files; the newest job of each file's name takes it, and a bad one changes none")
    p.set_defaults(func=cmd_update)


def cmd_update(args: argparse.Namespace) -> int:
    try:
        specs, origins, problems = load_job_specs(spec_files(args.specs))
    except ConfigError as exc:  # a directory without job files
        raise UsageError(str(exc)) from None
    store = open_store(args)
    hosts = hosts_file(args, store)
    try:
        found, ended = planned_updates(store, specs, origins, problems, hosts)
    except UpdateRefused as exc:
        raise UsageError("\n".join(exc.problems)) from None
    pid, now = controller_running(store.dir), time.time()
    for rec, spec, path in found:
        done = apply_update(store, rec, spec, path, now)
        when = (f" at the controller's next round (pid {pid})" if pid else " when the controller next runs")
        print(printable(str(done) + (when if done.restarts and not done.moves else "")))  # the spec's text
        for hint in submit_hints(spec, path, hosts) if done.changes else ():
            print(printable(f"  warning: {hint}"))
    for said in ended:
        print(said)
    return 0
