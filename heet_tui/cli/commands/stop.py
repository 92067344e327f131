"""``heet-tui stop``: stop the controller that runs on a state directory, and wait until it has.

A script stopping ``heet-tui run`` read the pid from ``status --json`` and sent SIGTERM itself,
with no way to know when the controller had let go of the store (the next ``run`` then failed
on the lock). Its jobs train on: the next controller on the store picks them up where they are.
A TUI's own controller closes that TUI, someone's screen, so it takes ``--force``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from heet_tui.cli.arg_types import finite_float
from heet_tui.cli.commands.jobs import open_store, state_dir
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import DB_NAME, Store

OWNER_SETTING = "controller_owner"  # {"pid", "kind": "run"}, written by heet-tui run once it holds the store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stop", help="stop the controller running on the state directory (its jobs train on)")
    add_location_options(p, reads_hosts=False)
    p.add_argument("--wait", type=finite_float, default=60.0, metavar="S",
                   help="seconds to wait for it to let go of the state (default 60); 0 sends the signal only")
    p.add_argument("--force", action="store_true", help="stop it also when it is a TUI's (that TUI closes)")
    p.set_defaults(func=cmd_stop)


def mark_headless(store: Store) -> None:
    """Say that the controller holding ``store`` is this ``heet-tui run`` (``stop`` asks)."""
    store.set_setting(OWNER_SETTING, json.dumps({"pid": os.getpid(), "kind": "run"}))


def cmd_stop(args: argparse.Namespace) -> int:
    if args.wait < 0:
        raise UsageError(f"--wait must be 0 or more, got {args.wait:g}")
    where = state_dir(args)
    pid = controller_running(where) if (where / DB_NAME).is_file() else None
    if pid is None:  # nothing to do is not a failure: a script's "make sure it is stopped"
        print(f"heet-tui: no controller runs on {where}: nothing to stop", file=sys.stderr)
        return 0
    if pid <= 0:
        raise CliError(f"a controller holds {where} but its lock names no pid: stop it where it runs")
    store = open_store(args)
    if not args.force and not _headless(store, pid):
        raise CliError(f"the controller on {where} (pid {pid}) is not a heet-tui run but a TUI's (or one still "
                       "starting): quit that TUI (q), or heet-tui stop --force closes it")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended between the two looks
    except PermissionError:
        raise CliError(f"the controller on {where} (pid {pid}) is another user's process: not stopped") from None
    deadline = time.monotonic() + args.wait
    while args.wait and controller_running(where) is not None:
        if time.monotonic() >= deadline:
            raise CliError(f"the controller on {where} (pid {pid}) still runs {args.wait:g} s after SIGTERM "
                           f"(it stops its profiling runs first; its log: {where / 'controller.log'})")
        time.sleep(0.2)
    if not args.wait:
        print(f"controller (pid {pid}) on {where} sent SIGTERM")
        return 0
    running = sum(r.job.state.value in ("running", "resizing") for r in store.jobs(include_terminal=False))
    print(f"controller (pid {pid}) on {where} stopped" + (
        f"; {running} job(s) train on, unwatched, and the next heet-tui run (or TUI) on it picks them up" if running
        else ""))
    return 0


def _headless(store: Store, pid: int) -> bool:
    try:
        owner = json.loads(store.setting(OWNER_SETTING) or "{}")
        return isinstance(owner, dict) and owner.get("kind") == "run" and int(owner.get("pid", 0)) == pid
    except (ValueError, TypeError):
        return False
