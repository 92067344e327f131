"""``heet-tui jobs [NAME] [--json]``: every job in the state store (or one, in detail), with or without a
running controller."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from heet_tui.cli.commands.job_details import job_row, show_job, stored_checkpoint_hosts
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.table import first_line, line_room
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import DB_NAME, Store, StoreError, default_state_dir
from heet_tui.core.durations import duration
from heet_tui.core.job import JobState, count_text, gpu_span
from heet_tui.core.metrics import number

MIN_MESSAGE_WIDTH = 30
SHOWN_ENDED = 20  # ended jobs listed without --all: the latest


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list jobs and their state (reads the state store)")
    add_location_options(p, reads_hosts=False)
    p.add_argument("name", nargs="?", metavar="NAME",
                   help="one job (id or name): its spec, progress, state history and latest events")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--events", type=int, metavar="N", help="with NAME: how many events (default 20)")
    p.add_argument("--all", action="store_true", help="every ended job too (default: active jobs and the latest "
                   f"{SHOWN_ENDED} that ended)")
    p.add_argument("--only", metavar="STATE[,STATE]", type=_states,
                   help=f"only jobs in these states ({', '.join(s.value for s in JobState)}); an ended state lists "
                   "every such job")
    p.set_defaults(func=cmd_jobs)


def state_dir(args: argparse.Namespace) -> Path:
    """The directory ``--state`` names, else the default one."""
    state = getattr(args, "state", None)  # not empty: main() refuses that for every command
    path = Path(state).expanduser() if state else default_state_dir()
    if path.exists() and not path.is_dir():  # exit 2, an input error (it was 1, or "nothing was submitted")
        raise UsageError(f"--state {path}: is not a directory (--state names a directory)")
    return path


def open_store(args: argparse.Namespace, create: bool = False) -> Store:
    """The store named by the global ``--state DIR`` (default ``$XDG_STATE_HOME/heet-tui``).

    A ``--state`` with no store in it is made only by the commands that begin one (``create``:
    submit, run): `jobs` and `status` made an empty one there, at a mistyped path or at a state
    directory deleted under its running controller, and said nothing was running."""
    if getattr(args, "state", None) and not create and not (state_dir(args) / DB_NAME).is_file():
        raise UsageError(f"no state store in {state_dir(args)}: nothing was submitted with this --state "
                         "(heet-tui submit or run begins one there)")
    try:
        store = Store(state_dir(args))
    except StoreError as exc:
        raise CliError(str(exc)) from None
    if store.read_only_why:  # what is listed is not live: the controller cannot record anything now
        print(f"heet-tui: state store {store.dir} cannot be written ({store.read_only_why})", file=sys.stderr)
    return store


def job_rows(store: Store, ended: int | None = None) -> tuple[list[dict], int]:
    """Every active job and the latest ``ended`` of those that ended (all with None), and how
    many ended jobs were left out: a lab's store holds thousands."""
    allocations = store.current_allocations()
    records = store.jobs(ended=ended)
    ended_in_store = sum(n for state, n in store.state_counts().items() if JobState(state).terminal)
    left_out = ended_in_store - sum(r.job.state.terminal for r in records)
    at_hosts = stored_checkpoint_hosts(store)
    held = store.held_gpu_seconds(time.time())
    rows = [job_row(rec, allocations.get(rec.job.id), at_hosts, held.get(rec.job.id, 0.0)) for rec in records]
    starts = store.current_starts()
    for row in rows:  # what it ran at lately, recorded every 10 s: scripts had to parse `jobs NAME` for it
        # since its current run began: a relaunch at another size showed the old size's speed
        latest = store.latest_observation(row["id"], "running", starts.get(row["id"], 0.0)) \
            if row["allocation"] else None
        row["samples_per_s"], row["samples_per_s_at"] = (round(latest[3], 3), latest[4]) if latest else (None, None)
    return rows, left_out


def table_allocation(described: str | None) -> str:
    """An allocation as the table shows it: over more than two hosts, how many and the first two,
    without GPU indices (``jobs NAME`` and ``--json`` have them all). A 16-GPU job over five hosts
    made the column 300 characters wide for every row, three terminal lines per job."""
    if not described:
        return "-"
    size, _, where = described.partition(" on ")
    hosts = [part.split("[", 1)[0] for part in where.split("],") if part]
    if len(hosts) <= 2:
        return described
    return f"{size} on {len(hosts)} hosts: {hosts[0]}, {hosts[1]}, +{len(hosts) - 2}"


def _table_message(message: str) -> str:
    """"running on <allocation>" as the ALLOCATION column has it: a job over five hosts named them
    all again in its message, though that column was short."""
    lead = "running on "
    return lead + table_allocation(message[len(lead):]) if message.startswith(lead) and "[" in message else message


def cmd_jobs(args: argparse.Namespace) -> int:
    if args.events is not None and args.name is None:
        raise UsageError("--events N shows one job's latest N events: give the job, heet-tui jobs NAME "
                         f"--events {max(1, args.events)}")
    if args.events is not None and args.events < 1:  # "give the job" was said with the job given
        raise UsageError(f"--events {args.events}: N is how many of the job's latest events to show, 1 or more")
    store = open_store(args)
    if args.name is not None:
        return show_job(store, args.name, args.json, args.events or 20)
    only: frozenset[JobState] | None = args.only
    everything = args.all or (only is not None and any(state.terminal for state in only))
    rows, left_out = job_rows(store, None if everything else SHOWN_ENDED)
    if only is not None:  # 300 jobs of a sweep: the failed ones were lines among hundreds
        rows, left_out = [r for r in rows if JobState(r["state"]) in only], 0
    pid = controller_running(store.dir)
    if args.json:
        print(json.dumps({"controller_pid": pid, "jobs": rows, "ended_not_listed": left_out}, indent=2))
        return 0
    if not rows:
        print(f"no jobs in {store.dir}" if only is None else
              f"no {' or '.join(sorted(state.value for state in only))} jobs in {store.dir}")
        return 0
    # TOOK: submission to end, the job completion time the scheduler works to shorten
    # LOSS: the latest the script reported, when any did (what a sweep is compared by)
    losses = any("loss" in r["metrics"] for r in rows)
    # PRIO: where any job has one, why one waits while another runs (it was in jobs NAME alone)
    prios = any(r["priority"] for r in rows)
    head = ("ID", "STATE", "STEPS", "TARGET", *(("LOSS",) if losses else ()), "GPUS", *(("PRIO",) if prios else ()),
            "ALLOCATION", "AGE", "TOOK", "MESSAGE")
    now = time.time()
    table = [head] + [
        (r["id"], r["state"], str(r["steps"]), f"{count_text(r['target']['value'])} {r['target']['kind']}",
         *((number(r["metrics"].get("loss")),) if losses else ()), gpu_span(r["min_gpus"], r["max_gpus"]),
         *((str(r["priority"]),) if prios else ()), table_allocation(r["allocation"]),
         _age(now - r["submitted_at"]), duration(r["jct_s"]),
         # a cancel not yet carried out (no controller ran, or its run is out of reach) showed only in --json
         ("cancel requested; " if r["cancel_requested"] and not JobState(r["state"]).terminal else "")
         + _table_message(r["message"]))
        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head) - 1)]
    # the message takes what the terminal has left (COLUMNS, else the terminal, else 120); where that
    # is less than MIN_MESSAGE_WIDTH it goes on a line of its own under its row: forced to 30
    # characters past an 80-column edge, every row wrapped ("MES / SAGE")
    used = sum(widths) + 2 * len(widths)
    room = line_room(used, 0)
    below = room is not None and room < MIN_MESSAGE_WIDTH
    if below:
        room = line_room(4, MIN_MESSAGE_WIDTH)
    for row in table:
        cells = "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True))
        if not below:
            print(cells + "  " + first_line(row[-1], room))
        elif row is table[0]:
            print(cells.rstrip())
        else:
            print(cells.rstrip() + (f"\n    {first_line(row[-1], room)}" if row[-1] else ""))
    # Why a job failed is usually at the end of its message (the last log line): show it whole.
    for r in rows:
        if r["state"] == "failed" and first_line(r["message"], room) != r["message"]:
            print(f"{r['id']}: {r['message']}")
    if left_out:
        print(f"... and {left_out} older ended job(s): heet-tui jobs --all lists them")
    live = any(not JobState(r["state"]).terminal for r in rows)
    # without one, "waiting for approval: heet-tui plan approve" was read as something to do now
    print(f"controller: running (pid {pid})" if pid else "controller: not running" + (
        ": the live jobs' states and messages are as the last one left them; nothing moves, and no plan "
        "can be approved, until `heet-tui run` or the TUI runs on this state" if live else ""))
    return 0


def _states(text: str) -> frozenset[JobState]:
    """``running,queued`` as job states; argparse reports the ValueError's message as a usage error."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    known = {state.value: state for state in JobState}
    wrong = [name for name in names if name not in known]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or repr(text)}: not a job state "
                                         f"(one or more of {', '.join(known)}, comma-separated)")
    return frozenset(known[name] for name in names)


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    # "2160h" for a job 90 days old, which `jobs NAME` called "90d00h ago"
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h" if s < 172800 else f"{s // 86400}d"

