"""``heet-tui log NAME [-n LINES]``: the last lines a job's rank 0 wrote, read from its host.

The output lives on the host that ran the job, and only a controller holds connections to the
hosts, so this asks the controller running on the state store (over its attach socket, as an
attached TUI's ``l`` key does). With none running, a failed job's log tail as recorded when it
failed is still in the store, and is shown instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import sys

from heet_tui.cli.commands.job_details import job_named
from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.printable import printable
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.job_log import (
    CATCH_UP_LINES,
    MAX_LINES,
    NO_SUCH_GENERATION,
    NO_SUCH_RANK,
    recorded_failure_tail,
)
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store
from heet_tui.core.job import JobState

REPLY_TIMEOUT_S = 30.0
FOLLOW_EVERY_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("log", help="a job's latest output (rank 0, or --rank), read from its host by the running "
                                   "controller")
    add_location_options(p, reads_hosts=False)
    p.add_argument("name", metavar="NAME", help="job id or name")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help=f"how many lines (1-{MAX_LINES}, default 50)")
    p.add_argument("--rank", type=int, default=0, metavar="R", help="another rank's output, read from its host")
    p.add_argument("--generation", type=int, default=None, metavar="G",
                   help="an earlier run's output (jobs NAME lists its runs; default the latest), from the host it ran "
                        "on while its files are kept there")
    p.add_argument("-f", "--follow", action="store_true",
                   help=f"go on printing new lines (read every {FOLLOW_EVERY_S:g} s) until the job ends or ctrl+c")
    p.set_defaults(func=cmd_log)


def cmd_log(args: argparse.Namespace) -> int:
    if not 1 <= args.lines <= MAX_LINES:
        raise UsageError(f"--lines must be 1-{MAX_LINES}, got {args.lines}")
    if args.rank < 0:
        raise UsageError(f"--rank must be >= 0, got {args.rank}")
    if args.generation is not None and not 1 <= args.generation < 2 ** 31:  # a huge one overflowed SQLite
        raise UsageError(f"--generation must be from 1 to {2 ** 31 - 1}, got {args.generation}")
    if args.generation is not None and args.follow:  # an ended run is not followed
        raise UsageError("--generation G reads an earlier run: without -f")
    store = open_store(args)
    rec = job_named(store, args.name)
    if controller_running(store.dir) is None:
        if args.generation is not None and store.last_allocation(rec.job.id, args.generation) is None:
            raise UsageError(f"{rec.job.id}: it {NO_SUCH_GENERATION} {args.generation} (jobs {rec.job.id} lists its runs)")
        if args.rank or args.generation is not None:
            which = f"rank {args.rank}'s log" if args.rank else f"generation {args.generation}'s log"
            raise CliError(f"{rec.job.id}: no controller runs to read {which} from its host (start heet-tui run); "
                           "what is recorded here is the tail of the rank a failed job failed on")
        return _recorded_tail(store, rec.job.id, args.lines)
    try:
        asyncio.run(_ask(store, rec.job.id, args.lines, args.follow, args.rank, args.generation))
    except (ControllerGone, ValueError, TimeoutError) as exc:
        said = str(exc) or "the controller did not answer in time"
        said = said if said.startswith(f"{rec.job.id}:") else f"{rec.job.id}: {said}"
        mistake = NO_SUCH_RANK in said or NO_SUCH_GENERATION in said  # the asker's: exit 2, not 1
        raise (UsageError if mistake else CliError)(said) from None
    except KeyboardInterrupt:
        return 130  # Ctrl-C ends `log -f`, as README's exit codes say
    return 0


async def _ask(store: Store, job_id: str, lines: int, follow: bool, rank: int = 0,
               generation: int | None = None) -> None:
    backend = AttachedBackend(store.dir)
    await backend.start()
    try:
        shown = await asyncio.wait_for(backend.job_log(job_id, lines, rank, generation), REPLY_TIMEOUT_S)
        for line in shown:
            print(printable(line), flush=True)
        waiting = False  # the host is out: said once, until lines come again
        while follow:
            if backend.gone is not None:
                backend = await _attach_again(store, backend)
            rec = store.job(job_id)
            ended = rec is None or rec.job.state.terminal  # read before the last fetch: nothing after it is missed
            await asyncio.sleep(0 if ended else FOLLOW_EVERY_S)
            try:
                fetched = await asyncio.wait_for(backend.job_log(job_id, MAX_LINES, rank), REPLY_TIMEOUT_S)
            except TimeoutError:  # a hung controller (kill -STOP, a very long round): its jobs run on
                if not waiting:
                    say(f"(the controller has not answered for {REPLY_TIMEOUT_S:g} s; still following)")
                waiting = True
                continue
            except ValueError as exc:  # its host dropped out: the job may well run on (host_loss.py)
                if backend.gone is not None:
                    continue  # the controller stopped: its jobs run on, and a restarted one is followed
                if ended:
                    raise
                if not waiting:
                    say(f"({exc}; still following while the job is {rec.job.state.value})")
                waiting = True
                continue
            waiting = False
            for line in await _rest_of_previous_run(backend, job_id, rank, shown, fetched):
                print(printable(line), flush=True)
            lines, skipped = new_lines(shown, fetched)
            # nothing shown yet of this run and a full read: a burst before the first line was cut unsaid
            skipped = skipped or (len(shown) <= 1 and len(fetched) > MAX_LINES)
            if skipped:  # after an outage, or a burst: read back further (115 lines were lost after a 90 s cut)
                with contextlib.suppress(ValueError, TimeoutError):
                    more = await asyncio.wait_for(backend.job_log(job_id, CATCH_UP_LINES, rank), REPLY_TIMEOUT_S)
                    found = new_lines(shown, more)
                    if found[1] is False or len(more) > len(fetched):  # else the longer read at least
                        (lines, skipped), fetched = found, more
                        skipped = skipped or (len(shown) <= 1 and len(more) > CATCH_UP_LINES)
            if skipped:
                say("(... more lines came since the last read than one read holds: some were not shown)")
            for line in lines:
                print(printable(line), flush=True)
            shown = fetched
            if ended:  # it ended as a job that finished does, with nothing said: say how it ended
                say(f"({job_id} is {rec.job.state.value})" if rec is not None else f"({job_id} is gone)")
                return
    finally:
        await backend.stop()


async def _rest_of_previous_run(backend: AttachedBackend, job_id: str, rank: int, shown: tuple[str, ...],
                                fetched: tuple[str, ...]) -> list[str]:
    """What the run shown last wrote after the last read, once the job has been relaunched: its
    last steps and how its stop went (a saved checkpoint, or a traceback), which the next read,
    of the new run, skipped."""
    before = _generation_of(shown[0]) if shown else None
    if before is None or not fetched or _run_of(shown[0]) == _run_of(fetched[0]):
        return []
    try:
        rest = await asyncio.wait_for(backend.job_log(job_id, MAX_LINES, rank, before), REPLY_TIMEOUT_S)
    except (ValueError, TimeoutError):  # its host is out, or the controller is slow: the new run goes on
        return []
    return new_lines(shown, rest)[0] if rest and _run_of(rest[0]) == _run_of(shown[0]) else []


def _generation_of(header: str) -> int | None:
    found = re.search(r" generation (\d+), rank \d+ on ", header)
    return int(found.group(1)) if found else None


async def _attach_again(store: Store, gone: AttachedBackend) -> AttachedBackend:
    """A follow outlives its controller: a restart (an upgrade, a crash) must not end every ``log -f``
    someone left open, since the jobs run on without it. Waits until one answers on the state again."""
    await gone.stop()
    say(f"({gone.gone}; still following: waiting for a controller on {store.dir})")
    while True:
        await asyncio.sleep(FOLLOW_EVERY_S)
        if controller_running(store.dir) is None:
            continue
        backend = AttachedBackend(store.dir)
        try:
            await backend.start()
        except ControllerGone:  # starting, not answering yet
            await backend.stop()
            continue
        say(f"(following again through the controller, pid {backend.pid})")
        return backend


def say(remark: str) -> None:
    """What ``log -f`` says of itself goes to stderr: in stdout, among the job's lines, it reached
    whatever a script piped the log into."""
    print(remark, file=sys.stderr, flush=True)


def new_lines(before: tuple[str, ...], now: tuple[str, ...]) -> tuple[list[str], bool]:
    """The lines of ``now`` after what ``before`` showed, and whether some between were skipped.
    Both start with a header naming the run; a new run (another generation, after a restart) is
    shown from its header.

    ``now`` is a longer read than the first ``before`` (the whole retained tail): ``before`` sits
    inside it, and what follows its first place there is new. Looking for ``before`` only at the
    start of ``now`` printed the whole log a second time whenever it was longer than ``-n``. In
    a steady follow both reads are full, and ``now`` starts inside ``before``: the longest end of
    ``before`` that ``now`` begins with. The last line shown may have changed since, being
    unfinished (a progress bar that redraws itself after ``\r``): matched whole, a tqdm job's log
    was printed again at every read. Neither means more came than one read holds (skipped).
    """
    if not before or not now or _run_of(before[0]) != _run_of(now[0]):
        return list(now), False
    # a read that stopped short of a line's start begins with that line's end ("[...] "), cut at
    # another place each time: matched, a log of 300,000-character lines was printed again each read
    old, cur = _uncut(before[1:]), _uncut(now[1:])
    for shown in (old, old[:-1]) if len(old) > 1 else (old,):
        after = _after(shown, cur)
        if after is not None:
            return after, False
    return list(cur), bool(cur and old)


def _uncut(lines: tuple[str, ...]) -> tuple[str, ...]:
    return lines[1:] if lines and lines[0].startswith("[...] ") else lines


def _after(old: tuple[str, ...], cur: tuple[str, ...]) -> list[str] | None:
    if old:
        for end in range(len(old), len(cur) + 1):
            if cur[end - len(old):end] == old:
                return list(cur[end:])
    for k in range(min(len(old), len(cur)), 0, -1):
        if old[-k:] == cur[:k]:
            return list(cur[k:])
    return None


def _run_of(header: str) -> str:
    """ "a generation 3, rank 0 on h1" of "a generation 3, rank 0 on h1, last 50 line(s):" """
    return header.split(", last ")[0]


def _recorded_tail(store: Store, job_id: str, lines: int) -> int:
    tail = recorded_failure_tail(store, job_id)
    if not tail:
        raise CliError(f"{job_id}: no controller runs on {store.dir}, and only a controller reads output from the "
                       "hosts: start one (heet-tui run, or heet-tui) and ask again; heet-tui jobs "
                       f"{job_id} shows what the store holds")
    rec = store.job(job_id)
    if rec is not None and rec.job.state is not JobState.FAILED:  # retried since: that failure is history
        print(f"(no controller runs on {store.dir}: this is the tail recorded when {job_id} failed before it was "
              f"retried; it is {rec.job.state.value} now, and only a controller reads its latest output)")
    else:
        print(f"(no controller runs on {store.dir}: this is the tail recorded when {job_id} failed)")
    for line in tail[-lines:]:
        print(printable(line))
    return 0
