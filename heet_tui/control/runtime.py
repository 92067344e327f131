"""What the controller knows about a job's live processes, and how their exits are judged.

One ``Run`` is one launch of a job at one allocation generation: a process per GPU (rank),
each an agent job named ``<job>.r<rank>`` (the agent runs one process per name and host, and a
job may have several ranks on a host). Profiling runs use ``<job>.p<n>``. Everything here is
pure so the exit rules can be tested without processes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from heet_tui.cluster.gpu_users import gpus_used_by_others
from heet_tui.core.allocation import Allocation
from heet_tui.core.durations import duration
from heet_tui.core.job import Job, JobSpec, TargetKind

if TYPE_CHECKING:
    pass

EXIT_DONE, EXIT_FENCED, EXIT_STOPPED = 0, 3, 143  # examples/training.py's exit codes
_AGENT_ID = re.compile(r"^(?P<job>.+)\.(?P<kind>[rp])(?P<n>\d+)(?:\.(?P<store>[0-9a-f]{8}))?\Z")


def _store_part(store_id: str) -> str:
    return f".{store_id[:8]}" if store_id else ""


def rank_agent_id(job_id: str, rank: int, store_id: str) -> str:
    """The name a rank's process has on its host: ``"cnn.r1.4a146a78"``.

    Job ids and generations are unique only within one state store, and agents keep the
    records of what they ran; the store's id in the name keeps a fresh store (a deleted state
    dir, a second one) from taking an older store's process of the same job for its own.
    """
    return f"{job_id}.r{rank}{_store_part(store_id)}"


def profile_agent_id(job_id: str, n: int, store_id: str) -> str:
    return f"{job_id}.p{n}{_store_part(store_id)}"


def store_part(agent_id: str) -> str | None:
    """The state store an agent id names (its first 8 hex digits), ``None`` when it names none."""
    m = _AGENT_ID.match(agent_id)
    return m["store"] if m else None


def foreign_gpus(cluster, store_id: str, newer: Collection[tuple[str, str, int]] = ()) -> dict[str, set[int]]:
    """host -> GPUs held by live processes another state store started, or a newer copy of this
    one (``newer``: (host, agent id, generation)); ``recovery`` leaves them running. From what
    the agents last reported."""
    held: dict[str, set[int]] = {}
    for status in cluster.status():
        for job in cluster.jobs(status.name):
            if not job.running:  # agents keep up to 100 ended records each: skip them before the regex
                continue
            other = store_part(job.job_id)
            if (other is not None and other != store_id[:8]) or (status.name, job.job_id, job.generation) in newer:
                held.setdefault(status.name, set()).update(job.gpus)
    return held


def stale_gpus(cluster, fenced: Collection[tuple[str, str, int]], except_job: str | None = None
               ) -> dict[str, set[int]]:
    """host -> GPUs still held by runs of this store the controller fenced (``fenced``: (host,
    agent id, generation)), a crashed controller's runs stopping on SIGTERM for up to their grace
    period: new profiling runs were started on their GPUs beside them. ``except_job``'s own are
    left out: its agent refuses a relaunch under the same name until the old process is gone."""
    held: dict[str, set[int]] = {}
    if not fenced:
        return held
    for status in cluster.status():
        for job in cluster.jobs(status.name):
            if not job.running or (status.name, job.job_id, job.generation) not in fenced:
                continue
            parsed = parse_agent_id(job.job_id)
            if parsed is not None and parsed[0] != except_job:
                held.setdefault(status.name, set()).update(job.gpus)
    return held


def outside_gpus(cluster, store_id: str, newer: Collection[tuple[str, str, int]] = ()) -> dict[str, set[int]]:
    """host -> GPUs in use by processes this state store did not start: another store's jobs,
    and processes heet did not start at all (someone's notebook: cluster/gpu_users.py); and
    the free GPUs of hosts whose agent launches nothing now (a full disk)."""
    return union_gpus(foreign_gpus(cluster, store_id, newer), gpus_used_by_others(cluster.status()),
                      free_gpus_of_blocked(cluster.status()))


def launch_blocked(statuses) -> set[str]:
    """Hosts whose agent refuses launches (it cannot record them: a full disk). Their jobs are
    left out of planning: a resize or move would stop them there for a relaunch that fails."""
    return {s.name for s in statuses if s.launch_blocked}


def free_gpus_of_blocked(statuses) -> dict[str, set[int]]:
    return {s.name: {g.index for g in s.gpus} - {g for g, _ in s.gpu_jobs} for s in statuses if s.launch_blocked}


def union_gpus(*parts: dict[str, set[int]]) -> dict[str, set[int]]:
    """host -> GPUs, merged."""
    out: dict[str, set[int]] = {}
    for part in parts:
        for host, gpus in part.items():
            out.setdefault(host, set()).update(gpus)
    return out


def parse_agent_id(agent_id: str) -> tuple[str, str, int] | None:
    """``"cnn.r1.4a146a78" -> ("cnn", "r", 1)``; ``None`` for a process heet-tui did not name."""
    m = _AGENT_ID.match(agent_id)
    return (m["job"], m["kind"], int(m["n"])) if m else None


class Outcome(StrEnum):
    DONE = "done"  # the target was reached
    STOPPED = "stopped"  # the controller asked it to stop (resize, preempt, cancel, profiled)
    INTERRUPTED = "interrupted"  # lost host or a SIGTERM from elsewhere: resume from checkpoint
    CRASHED = "crashed"  # retry with backoff, then fail


@dataclass
class RankProc:
    host: str
    agent_id: str
    rank: int
    gpus: tuple[int, ...]
    state: str = "unknown"  # unknown (not yet reported after a restart) | running | exited
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    ended_at: float | None = None  # by the controller's clock, when its host said how long ago

    @property
    def exited(self) -> bool:
        return self.state == "exited"


SIGTERM = 15


def culprit(ranks: Iterable[RankProc]) -> RankProc | None:
    """The exited rank a failure is blamed on: one whose launch its agent refused (the ranks after
    it were then never launched), one whose host was lost (its peers then fail on the broken
    connection), a signal other than SIGTERM before SIGTERM (what its peers get when one rank
    fails), the first to end, one that exited with its own code, then the lowest rank.

    Blaming the lowest failed rank put a peer's "rank1 boom" error on rank 0's SIGTERM. Blaming
    a lost rank first put a refusal on rank 0's host (its checkpoint dir blocked) on rank 1's
    "not launched", round after round; and an exit code before a signal put a rank 1 SIGKILLed
    by hand on rank 0's "Connection reset by peer" that followed it."""
    failed = [r for r in ranks if r.exited and r.exit_code not in (EXIT_DONE, EXIT_STOPPED)]
    if not failed:
        return None
    return min(failed, key=lambda r: (r.reason == NOT_LAUNCHED, not (r.reason or "").startswith(LAUNCH_REFUSED),
                                      not (r.reason or "").startswith("lost"), r.signal == SIGTERM,
                                      r.ended_at is None, r.ended_at or 0.0, r.exit_code is None, r.rank))


@dataclass
class Run:
    job_id: str
    alloc: Allocation
    generation: int
    ranks: dict[int, RankProc]
    started_at: float
    profiling: bool = False
    stop_reason: str | None = None  # set when the controller (or a lost host) ends the run
    progress: dict[str, Any] | None = None
    progress_at: float | None = None
    reports: int = 0
    observed_at: float | None = None  # when its throughput was last recorded as an observation
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    side: bool = False  # a profiling run beside the job's life (it may be running), not a profiling round
    start_samples: float | None = None  # the job's samples at launch; None: adopted, its start not timed
    stop_sent_at: float | None = None  # when the controller first asked it to stop
    other_rank_reported: bool = False  # a rank other than 0 printed progress (said once per run)
    buffered_said: bool = False  # stopped as hung, its buffered lines flushed by the stop: said once
    quiet_said: bool = False  # the store's message says it is silent (stalls.quiet_message) until a report
    found_at_restart: bool = False  # rebuilt by a restarted controller: its silence counts from then
    spec: JobSpec | None = None  # the job's, for rules read every round (stalls.py, stop grace)
    resize_inherited: bool = False  # a previous controller was resizing it when it stopped (recovery.py)
    rates: list[float] = field(default_factory=list)  # a profiling run's samples/s, its first report left out

    def rank_for(self, host: str, agent_id: str) -> RankProc | None:
        for r in self.ranks.values():
            if r.host == host and r.agent_id == agent_id:
                return r
        return None

    def on_host(self, host: str) -> list[RankProc]:
        return [r for r in self.ranks.values() if r.host == host]

    @property
    def all_exited(self) -> bool:
        return all(r.exited for r in self.ranks.values())

    @property
    def any_exited(self) -> bool:
        return any(r.exited for r in self.ranks.values())

    def ended_at(self, not_before: float, now: float) -> float:
        """When its last rank ended, for a run that ended while no controller watched (done at
        night, read in the morning: its time was the morning's); ``now`` when a rank's time is
        unknown. Never before ``not_before``, the job's last change of state (not ``started_at``,
        which for a run found on restart is when it was found)."""
        times = [r.ended_at for r in self.ranks.values()]
        if not times or None in times:
            return now
        return min(now, max(not_before, *(t for t in times if t is not None)))


def ended_unwatched(late_s: float) -> str:
    """What an event adds when the run ended well before the controller heard of it."""
    return f" (it ended {duration(late_s)} before this controller heard of it)" if late_s >= 60 else ""


def reached_target(spec: JobSpec, progress: dict[str, Any] | None) -> bool:
    """True when a progress report (``step``, ``samples``) says the job's target was met."""
    if not progress:
        return False
    try:
        step, samples = float(progress.get("step", 0)), float(progress.get("samples", 0))
    except (TypeError, ValueError):
        return False
    target = spec.target
    if target.kind is TargetKind.STEPS:
        return step >= target.value
    if target.kind is TargetKind.SAMPLES:
        return samples >= target.value
    return spec.dataset_samples > 0 and samples >= target.value * spec.dataset_samples


def _done(spec: JobSpec | None, job: Job | None) -> str:
    """What an exit 0 means. The script says it is done, so the job is; but "target reached" of
    a script that reported no progress (or never got there) hid that heet measured nothing."""
    if spec is None or job is None or reached_target(spec, {"step": job.steps_done, "samples": job.samples_done}):
        return "target reached"
    if not job.steps_done and not job.samples_done:
        return "exited 0 without reporting progress (no valid @heet-progress line): counted done"
    return (f"exited 0 at step {job.steps_done}, short of its target as last reported: counted done (heet-tui retry "
            "goes on from its checkpoint)")


LAUNCH_REFUSED = "launch refused"  # a rank's exit reason when its agent would not start it
HOST_CANNOT_RECORD = "not launched: the agent cannot save its job table"  # remote/jobs.py: its disk is full
NOT_LAUNCHED = "lost: not launched"  # a rank's when an earlier rank of its run could not be launched
STALLED = "stalled"  # how the stop reason of a hung run starts (control/stalls.py)
# stop reasons of a run a plan step relaunches at once at its new place (the change's kind)
RELAUNCHED = frozenset({"grow", "shrink", "migrate", "resize"})


def exited_0_at_stop(run: Run, spec: JobSpec | None) -> bool:
    """Rank 0 exited 0 in answer to a stop this controller sent, short of the job's target: a
    script whose SIGTERM handler calls ``sys.exit(0)``. The stop is what ended it, not the
    target: such a job was counted done at 30 % of its steps after a resize, and a cancel of
    it read as done."""
    rank0 = run.ranks.get(0)
    return (rank0 is not None and rank0.exit_code == EXIT_DONE and run.stop_reason is not None
            and not run.profiling and spec is not None and not reached_target(spec, run.progress))


def judge(run: Run, spec: JobSpec | None = None, job: Job | None = None) -> tuple[Outcome, str]:
    """Why a run ended, from its ranks' exits and whether the controller stopped it.

    A run that reported reaching its target (``spec`` given) is done even when a rank then
    died on the way out (a collective library aborting at teardown): retrying it would launch
    a generation with nothing left to do. ``job``: its record, with the progress recorded.
    """
    rank0 = run.ranks.get(0)
    if rank0 is not None and rank0.exited and rank0.exit_code == EXIT_DONE and not exited_0_at_stop(run, spec):
        return (Outcome.STOPPED, "profiling run finished") if run.profiling else (Outcome.DONE, _done(spec, job))
    fenced = any(r.exit_code == EXIT_FENCED for r in run.ranks.values())
    if not run.profiling and not fenced and spec is not None and reached_target(spec, run.progress):
        # stopped past its target (a target lowered by `update`): no rank failed, and none was said to
        failed = run.stop_reason is None or any(r.exit_code not in (None, 0, EXIT_DONE, 128 + SIGTERM)
                                                for r in run.ranks.values())
        return Outcome.DONE, "target reached" + (" (a rank failed while exiting)" if failed else "")
    if run.stop_reason is not None:
        if run.stop_reason.startswith(STALLED):
            return Outcome.CRASHED, run.stop_reason  # hung: retried like a crash, then failed
        if run.stop_reason.startswith("host"):
            return Outcome.INTERRUPTED, run.stop_reason
        return Outcome.STOPPED, run.stop_reason
    r = culprit(run.ranks.values())
    if r is not None:
        how = f"exit code {r.exit_code}" if r.exit_code is not None else f"signal {r.signal}"
        if r.reason and r.reason.startswith("lost"):
            return Outcome.INTERRUPTED, f"rank {r.rank} on {r.host}: {r.reason}"
        if r.reason and r.reason.startswith(LAUNCH_REFUSED) and HOST_CANNOT_RECORD in r.reason:
            # the host's disk, not the job: counted as a crash it kept the job off a host that was fine again
            return Outcome.INTERRUPTED, f"rank {r.rank} on {r.host}: {r.reason}"
        if r.reason and r.reason.startswith(LAUNCH_REFUSED):
            return Outcome.CRASHED, f"rank {r.rank} on {r.host}: {r.reason}"  # the agent's reason, not a bare 127
        return Outcome.CRASHED, f"rank {r.rank} on {r.host} ended with {how}"
    if any(r.exit_code == EXIT_STOPPED for r in run.ranks.values()):
        # Nobody in this controller stopped it: a previous controller killed mid-resize, or a person.
        if run.resize_inherited:
            return Outcome.INTERRUPTED, "stopped for a resize the previous controller began before it stopped"
        return Outcome.INTERRUPTED, "stopped by a SIGTERM this controller did not send"
    return Outcome.CRASHED, "exited before reaching its target"


def backoff_s(crashes: int, base: float, cap: float = 300.0) -> float:
    return min(cap, base * 2 ** max(0, crashes - 1))


def gpus_held(runs: Iterable[Run]) -> dict[str, set[int]]:
    """host -> the GPUs the live ranks of ``runs`` hold there."""
    held: dict[str, set[int]] = {}
    for run in runs:
        for r in run.ranks.values():
            if not r.exited:
                held.setdefault(r.host, set()).update(r.gpus)
    return held
