"""``heet-tui log NAME [-n LINES]``: the last lines a job's rank 0 wrote, read from its host.

The output lives on the host that ran the job, and only a controller holds connections to the
hosts, so this asks the controller running on the state store (over its attach socket, as an
attached TUI's ``l`` key does). With none running, a failed job's log tail as recorded when it
failed is still in the store, and is shown instead.
"""

from __future__ import annotations

import argparse
import asyncio

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_state_option
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.job_log import MAX_LINES
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store

REPLY_TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="a job's latest output (rank 0), read from its host by the running controller")
    add_state_option(p, after_command=True)
    p.add_argument("name", metavar="NAME", help="job id or name")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help=f"how many lines (1-{MAX_LINES}, default 50)")
    p.set_defaults(func=cmd_log)


def cmd_log(args: argparse.Namespace) -> int:
    if not 1 <= args.lines <= MAX_LINES:
        raise UsageError(f"--lines must be 1-{MAX_LINES}, got {args.lines}")
    store = open_store(args)
    rec = store.find_job(args.name)
    if rec is None:
        known = ", ".join(r.job.id for r in store.jobs(include_terminal=False)) or "none"
        raise UsageError(f'no job "{args.name}" (active jobs: {known})')
    if controller_running(store.dir) is None:
        return _recorded_tail(store, rec.job.id)
    try:
        lines = asyncio.run(_ask(store, rec.job.id, args.lines))
    except (ControllerGone, ValueError, TimeoutError) as exc:
        raise CliError(f"{rec.job.id}: {exc or 'the controller did not answer in time'}") from None
    for line in lines:
        print(line)
    return 0


async def _ask(store: Store, job_id: str, lines: int) -> tuple[str, ...]:
    backend = AttachedBackend(store.dir)
    await backend.start()
    try:
        return await asyncio.wait_for(backend.job_log(job_id, lines), REPLY_TIMEOUT_S)
    finally:
        await backend.stop()


def _recorded_tail(store: Store, job_id: str) -> int:
    failures = [e for e in store.events(job_id, limit=200) if e.kind == "failed" and "\n" in e.message]
    if not failures:
        raise CliError(f"{job_id}: no controller runs on {store.dir}, and only a controller reads output from the "
                       "hosts: start one (heet-tui run, or heet-tui) and ask again; heet-tui jobs "
                       f"{job_id} shows what the store holds")
    print(f"(no controller runs on {store.dir}: this is the tail recorded when {job_id} failed)")
    for line in failures[-1].message.splitlines()[1:]:
        print(line)
    return 0
