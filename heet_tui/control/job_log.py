"""A job's output: the last lines rank 0 of its latest run wrote, for the Jobs screen, and
the tail of the rank that failed a job, for its message.

Fetched on request (the `l` key), not every round: each fetch is one request to one agent.
Rank 0 prints the progress lines and, in most scripts, the rest worth reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_agent.job_logs import MAX_SCAN_BYTES, MAX_TAIL_CHARS

from heet_tui.cluster import ClusterError
from heet_tui.cluster.remote_command import agent_state_dir
from heet_tui.control.crash_hints import crash_hint
from heet_tui.control.runtime import LAUNCH_REFUSED, STALLED, RankProc, Run, culprit, rank_agent_id
from heet_tui.control.stalls import NONE_SEEN
from heet_tui.control.stop_grace import note_killed_at_stop
from heet_tui.core.job import JobState

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.execution import Executor
    from heet_tui.control.store import Store

MAX_LINES = 500
CATCH_UP_LINES = 10_000  # what `log -f` asks for once a read of MAX_LINES missed lines (a reply holds 256K characters)
NO_SUCH_RANK = "had ranks"  # a log asked of a rank the run did not have: the asker's mistake
NO_SUCH_GENERATION = "has no generation"  # ... or of a generation it never had


async def job_log(ctl: Controller, job_id: str, lines: int = 200, rank: int = 0,
                  generation: int | None = None) -> tuple[str, ...]:
    """``rank``: another rank's output (its error when it was the one that failed) is on its own
    host, where a user had to look for it by hand. ``generation``: an earlier run's, whose last
    lines (how its stop went) a ``log -f`` that sees the job relaunched has not printed yet."""
    rec = ctl.store.job(job_id)
    if rec is None:
        raise ValueError(f"no job {job_id!r}")
    lines = max(1, min(int(lines), CATCH_UP_LINES))
    run = ctl.executor.runs.get(job_id)
    what = ""
    if run is None and generation is None and ctl.store.last_allocation(job_id) is None \
            and (rec.job.state is not JobState.FAILED or not recorded_failure_tail(ctl.store, job_id)):
        # profiling, or profiled and not run since: its short run's log is what there is to read
        run, what = profiling_run(ctl.executor, job_id), "profiling run, "
    if run is not None and rank in run.ranks and generation in (None, run.generation):
        host, agent_id, generation = run.ranks[rank].host, run.ranks[rank].agent_id, run.generation
    else:
        requested = generation
        last = ctl.store.last_allocation(job_id, generation)
        if last is None:
            if generation is not None:
                raise ValueError(f"{job_id}: it {NO_SUCH_GENERATION} {generation} (jobs {job_id} lists its runs)")
            if rank:
                raise ValueError(f"{job_id} has not run yet")
            # a job that failed while profiling said it "has not run yet": its tail is in the store
            tail = recorded_failure_tail(ctl.store, job_id)
            if tail:
                return (f"{job_id} failed before it ran (profiling), last {len(tail)} line(s) as recorded then:", *tail)
            # "yet" for a cancelled job that never got GPUs
            return (f"{job_id} never ran ({rec.job.state.value})" if rec.job.state.terminal else f"{job_id} has not run yet",)
        alloc, generation = last
        hosts = [h for h, gpus in alloc.hosts for _ in gpus]  # rank r runs on the r-th GPU's host (launch.py)
        if not 0 <= rank < len(hosts):
            which = "its latest run" if requested is None else f"its generation {generation}"
            ranks = "0 only" if len(hosts) == 1 else f"0-{len(hosts) - 1}"
            raise ValueError(f"{job_id}: {which} {NO_SUCH_RANK} {ranks}, not {rank}")
        host, agent_id = hosts[rank], rank_agent_id(job_id, rank, ctl.store.store_id)
    try:
        path, found = await ctl.cluster.log_file_tail(host, agent_id, lines=lines, generation=generation)
    except ClusterError as exc:
        raise ValueError(f"{job_id}: cannot read its log on {host}: {exc}") from None
    where = f" ({host}:{path})" if path else ""
    if len(found) < lines and found and found[0].startswith("[...] "):
        where += f"; fewer than {lines}: a tail is read from the last {MAX_SCAN_BYTES >> 20} MiB of the log"
    elif len(found) < lines and sum(len(line) + 1 for line in found) > MAX_TAIL_CHARS * 0.9:
        where += f"; fewer than {lines}: one tail holds at most {MAX_TAIL_CHARS >> 10}K characters"
    header = f"{job_id} {what}generation {generation}, rank {rank} on {host}, last {len(found)} line(s){where}:"
    return (header, *found)


def profiling_run(executor: Executor, job_id: str) -> Run | None:
    """The job's live profiling run (its own first, then a side one), else its latest one that
    ended: a job stuck in profiling said "profiling runs keep no log here", and the log that
    showed why was on the host all along."""
    live = sorted(executor.profiles.get(job_id, ()), key=lambda r: r.side)
    return live[0] if live else executor.last_profiled.get(job_id)


def recorded_failure_tail(store: Store, job_id: str) -> tuple[str, ...]:
    """The log tail stored with the job's latest failure (``fail_with_log_tail``), without its reason line."""
    failures = [e for e in store.events(job_id, limit=200) if e.kind == "failed" and "\n" in e.message]
    return tuple(failures[-1].message.splitlines()[1:]) if failures else ()


async def _blamed_tail(executor: Executor, run: Run) -> tuple[RankProc, list[str], bool]:
    """The rank a run's end is blamed on, its log's tail, and whether it never started: a rank its
    agent refused has no log of its own (an older run's would mislead)."""
    rank = culprit(run.ranks.values()) or run.ranks[min(run.ranks)]
    never_started = bool(rank.reason and rank.reason.startswith(LAUNCH_REFUSED))
    try:
        tail = [] if never_started else list(await executor.cluster.log_tail(rank.host, rank.agent_id, lines=20))
    except ClusterError as exc:
        tail = [f"{UNREAD}{exc})"]
    return rank, tail, never_started


UNREAD = "(log tail unavailable: "  # how a tail that could not be read is said in it


def _last_line(tail: list[str]) -> str:
    return next((line for line in reversed(tail) if line.strip()), "")


def _where_it_ran(executor: Executor, run: Run, host: str) -> tuple[str, str]:
    """The workdir of the spec the run was launched with ("" when it sets none) and the directory
    its command ran in on ``host`` ("" when its entry is gone): a spec's, else the agent's own."""
    spec = run.spec
    if spec is None and (rec := executor.store.job(run.job_id)) is not None:
        spec = rec.job.spec
    workdir = spec.workdir if spec is not None else ""
    if workdir:
        return workdir, workdir
    entry = next((h for h in executor.hosts.hosts if h.name == host), None) if executor.hosts is not None else None
    return "", agent_state_dir(entry.workdir, entry.name) if entry is not None else ""


async def say_crash(executor: Executor, run: Run, why: str, retry: str) -> None:
    """Each crash a retry follows is an event with its last log line: a job that crashed at step 3
    was profiled three times over a minute and a half, "queued" meanwhile and said nothing, and
    only its failure named the exception."""
    rank, tail, _ = await _blamed_tail(executor, run)
    last = "" if (last := _last_line(tail)).startswith(UNREAD) else last
    # a job's own run's crash is its event just before: this says what comes of it; a profiling
    # run's has none but this
    said = f"; its last log line: {last}" if last else ""
    crash = f"{why}; " if run.profiling else ""
    executor.store.add_event(executor.clock(), "retry", f"{run.job_id}: {crash}{retry}{said}"[:2000], run.job_id,
                             rank.host)


async def say_stop_warning(executor: Executor, run: Run, grace: float, now: float) -> None:
    """``stop_grace.note_killed_at_stop``, with the last line the blamed rank's log has: a save that
    failed on a full disk was blamed on DataLoader workers while the log said "No space left"."""
    rank, tail, _ = await _blamed_tail(executor, run)
    last = "" if (last := _last_line(tail)).startswith(UNREAD) else last
    note_killed_at_stop(executor.store, run, grace, now, last)


async def fail_with_log_tail(executor: Executor, run: Run, why: str, crashes: int) -> None:
    """Fail the job, quoting the last line the rank it is blamed on wrote (the whole tail goes to
    the event log and the job's details): that line is usually the exception."""
    rank, tail, never_started = await _blamed_tail(executor, run)
    last = _last_line(tail)
    said = f"; last log line: {last}"
    if not last and not never_started:  # it ended "last log line:" and nothing: rank 1 wrote none
        said = f"; rank {rank.rank}'s log is empty"
        if why.startswith(STALLED) and NONE_SEEN in why:  # a script whose stdout is a buffered file
            said += ": is its output buffered? flush stdout after each line (print(..., flush=True)), docs/TRAINING.md"
        if rank.rank != 0 and (first := run.ranks.get(0)) is not None:
            try:
                tail = list(await executor.cluster.log_tail(first.host, first.agent_id, lines=20))
            except ClusterError:
                tail = []
            if last := _last_line(tail):
                said += f"; rank 0's last log line: {last}"
    executor.log_tails[run.job_id] = tuple(tail)
    hint = crash_hint(tail, executor.hosts is not None and rank.host in executor.hosts.emulated_names(),
                      *_where_it_ran(executor, run, rank.host))
    message = f"{why} ({crashes} attempt{'' if crashes == 1 else 's'})" + (f": {hint}" if hint else "") + (said if not never_started else "")
    executor.store.try_set_state(run.job_id, JobState.FAILED, executor.clock(), message[:500])
    executor.health.job_failed(run.job_id)
    lines = [why, *tail, *([f"hint: {hint}"] if hint else [])]
    executor.store.add_event(executor.clock(), "failed", "\n".join(lines)[-4000:], run.job_id, rank.host)
    executor.notify()
