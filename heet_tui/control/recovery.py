"""Rebuilding live state after a controller restart, and fencing what should no longer run.

The store says which generation of each job is meant to run where; each agent reports, on
every (re)connect, the processes it has (including ones it re-adopted and ones that ended
while nobody listened). Matching the two gives, per process: adopt it (it is the current
generation: no relaunch, so never a duplicate), record its exit, or fence it (a stale
generation left behind on a host that was lost and came back, or a profiling run that
nobody waits for any more). A stale generation that finished the job while its host was cut
off makes the job done. A process another state store started (its agent id names that
store) is left running: it is not this controller's to stop, and its controller may come back
for it; its GPUs are kept out of plans meanwhile (``runtime.foreign_gpus``).

A process that names this store but a job it never had, or a generation newer than it ever
launched, was started by a newer copy of this state directory: this one is a restored backup
or an old copy. Fenced as stale, it was a running job of the newer copy killed (six at once,
seen); it is left running like another store's, and said loudly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from heet_tui.cluster import RemoteJob
from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.execution import Executor
from heet_tui.control.host_loss import UNREACHED
from heet_tui.control.newer_copies import (
    BELIEVED_AHEAD,
    MOST_BELIEVED,
    note_unknown_claims,
    remember,
    remembered,
)
from heet_tui.control.progress_reports import record_unseen_progress
from heet_tui.control.reclaim import reclaim_left_behind
from heet_tui.control.runtime import (
    EXIT_DONE,
    RankProc,
    Run,
    parse_agent_id,
    rank_agent_id,
    reached_target,
    store_part,
)
from heet_tui.control.seen_exits import ended_seen
from heet_tui.control.store import Store
from heet_tui.core.job import HOST_OUT, JobState
from heet_tui.core.metrics import training_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Verdict:
    remote: RemoteJob
    action: str  # adopt | exited | fence | foreign | newer | newer-ended | finished | ignore


def rebuild_runs(store: Store, executor: Executor, now: float, why: str = "controller restarted") -> list[str]:
    """Runs for every job the store says is running, with ranks not yet confirmed by any agent.
    Jobs the executor still holds runs for are left as they are: after a store outage (``why``)
    only the runs it let go of while an event's writes failed are rebuilt."""
    notes: list[str] = []
    expected: list[str] = []
    allocations = store.current_allocations()
    for rec in store.jobs(include_terminal=False):
        job = rec.job
        if job.id in executor.runs or job.id in executor.profiles:
            continue
        if job.state is JobState.PROFILING:
            store.try_set_state(job.id, JobState.QUEUED, now, f"{why} during profiling")
            continue
        if job.state not in (JobState.RUNNING, JobState.RESIZING):
            continue
        current = allocations.get(job.id)
        if current is None:
            store.try_set_state(job.id, JobState.QUEUED, now, f"{why}; no allocation on record")
            continue
        alloc, generation = current
        ranks, rank = {}, 0
        for host, gpus in alloc.hosts:
            for gpu in gpus:
                ranks[rank] = RankProc(host, rank_agent_id(job.id, rank, store.store_id), rank, (gpu,), "unknown")
                rank += 1
        executor.runs[job.id] = Run(job.id, alloc, generation, ranks, now, spec=job.spec,
                                    resize_inherited=job.state is JobState.RESIZING, found_at_restart=True)
        expected.append(job.id)
    if expected:  # one notice, not one toast per job naming a generation
        some = ", ".join(expected[:3]) + (f" and {len(expected) - 3} more" if len(expected) > 3 else "")
        notes.append(f"{len(expected)} job(s) were running when the controller last stopped ({some}): "
                     "looking for them on their hosts" if why == "controller restarted" else
                     f"{len(expected)} job(s) to look for on their hosts after {why} ({some})")
    return notes


def note_picked_up(store: Store, run: Run, now: float) -> None:
    """Said once every rank of a job found running after a controller restart is confirmed:
    the restart notice said "looking for them", and nothing said they were found."""
    rec = store.job(run.job_id)
    step = f" at step {rec.job.steps_done}" if rec is not None else ""
    store.add_event(now, "adopt", f"{run.job_id} generation {run.generation}: found running "
                    f"({run.alloc.describe()}){step}; carried on, not restarted", run.job_id)
    if rec is not None and rec.job.state is JobState.RUNNING and rec.job.message.startswith(f"{HOST_OUT} "):
        # its host was out when a controller last ran (or not in its hosts file): found running, that is
        # over; the message stayed to the job's end, and the TUI showed it as "host out"
        store.set_state(run.job_id, JobState.RUNNING, now, f"running on {run.alloc.describe()}")


MAX_CLAIMS_SAID = 5  # per host and report: each its own notice and event


def judge_reported(executor: Executor, store: Store, host: str, jobs: tuple[RemoteJob, ...]) -> list[Verdict]:
    """What to do with each process an agent reported (pure apart from reading state)."""
    out = []
    mine, copies = store.store_id[:8], remembered(store)
    for remote in jobs:
        parsed = parse_agent_id(remote.job_id)
        if parsed is None or remote.generation > MOST_BELIEVED:  # no job of ours restarted a million times
            out.append(Verdict(remote, "ignore"))
            continue
        found = executor.find(host, remote.job_id, remote.generation)
        other = store_part(remote.job_id)
        if found is not None:
            out.append(Verdict(remote, "adopt" if remote.running else "exited"))
        elif remote.running and other is not None and other != mine:
            out.append(Verdict(remote, "foreign"))
        elif other == mine and ((parsed[0], remote.generation) in copies
                                or _never_launched_here(store, parsed, remote.generation)):
            out.append(Verdict(remote, "newer" if remote.running else "newer-ended"))
        elif remote.running:  # ours, or from a version that did not name the store: stale
            out.append(Verdict(remote, "fence"))
        elif other == mine and _finished_while_cut_off(store, host, remote):
            out.append(Verdict(remote, "finished"))
        else:
            out.append(Verdict(remote, "ignore"))
    return out


async def reconcile_host(executor: Executor, store: Store, cluster, host: str, jobs: tuple[RemoteJob, ...],
                         now: float) -> list[str]:
    """Apply the verdicts for one host's report; ranks expected there but missing count as lost."""
    notes = []
    verdicts = judge_reported(executor, store, host, jobs)
    foreign = sorted(g for v in verdicts if v.action == "foreign" for g in v.remote.gpus)
    if foreign:
        notes.append(f"{host}: left running the processes another state store started there (GPUs "
                     f"{', '.join(map(str, foreign))}); plans keep off those GPUs")
    newer = {(host, v.remote.job_id, v.remote.generation) for v in verdicts if v.action == "newer"}
    remember(store, [(v.remote.job_id, v.remote.generation) for v in verdicts if v.action in ("newer", "newer-ended")])
    note_unknown_claims(store, [v.remote.job_id for v in verdicts if v.action == "newer"], now)
    fresh = sorted(newer - executor.newer_copies)
    if len(fresh) > MAX_CLAIMS_SAID:  # a host listing 200 such runs gave 200 notices and events
        notes.append(f"{host} also runs {len(fresh) - MAX_CLAIMS_SAID} more processes this state store never "
                     "launched (each as below); their GPUs are kept out of plans")
        store.add_event(now, "host", notes[-1], None, host)
    for said in fresh[:MAX_CLAIMS_SAID]:
        unknown = store.job((parse_agent_id(said[1]) or ("",))[0]) is None
        notes.append(f"{host} runs {said[1]} generation {said[2]}, which this state store never launched: a newer "
                     f"copy of {store.dir} started it (is this one a restored backup or an old copy?)"
                     f"{', or the host reports a job it does not run' if unknown else ''}. It is left "
                     "running and its GPUs kept out of plans; if the newer state directory exists, stop this "
                     "controller and run heet-tui with that --state")
        store.add_event(now, "host", notes[-1], None, host)
    executor.newer_copies = {k for k in executor.newer_copies if k[0] != host} | newer
    fenced: list[tuple[tuple[str, str, int], RemoteJob]] = []
    fenced_ids: dict[tuple[str, int], list[str]] = {}  # (job, generation): one notice each, not one per rank
    for v in verdicts:
        r = v.remote
        if v.action == "adopt":
            found = executor.find(host, r.job_id, r.generation)
            if found is not None and found[1].state in ("unknown", "launching"):
                recovered, found[1].state = found[1].state == "unknown", "running"
                record_unseen_progress(store, found[0], found[1], r.progress)
                if recovered and all(rank.state == "running" for rank in found[0].ranks.values()):
                    note_picked_up(store, found[0], now)
        elif v.action == "exited":
            executor.on_exit(r)
        elif v.action == "finished" and not executor.read_only:
            notes.append(await _done_by_stale_copy(executor, store, host, r, now))
        elif v.action == "fence" and not executor.read_only:
            parsed = parse_agent_id(r.job_id)
            assert parsed is not None
            try:
                await cluster.fence(host, r.job_id, r.generation + 1)
                executor.fenced.add((host, r.job_id, r.generation))  # its GPUs in use until it has gone
                fenced_ids.setdefault((parsed[0], r.generation), []).append(r.job_id)
                if parsed[1:] == ("r", 0) and (step := _step_of(r)) is not None \
                        and _rank0_launched_on(store, parsed[0], r.generation, host) \
                        and not ended_seen(store, parsed[0], r.generation):  # its checkpoint there
                    executor.checkpoints.note_left_behind(parsed[0], host, step)  # may be ahead: reclaim.py
                fenced.append((parsed, r))
            except Exception as exc:  # noqa: BLE001 - a failed fence is retried on the next report
                log.warning("fence %s on %s failed: %s", r.job_id, host, exc)
    notes += fenced_notes(host, fenced_ids)
    # once the whole report is in: the host's ready came before it, and a checkpoint taken back then
    # was the step known at the loss (15,870), where its fenced copy had trained on to 70,980
    taken = reclaim_left_behind(executor, store, host, now)
    for parsed, r in fenced:
        trained = _trained_on(store, parsed[0], r) if parsed[1] == "r" else ""
        rec = store.job(parsed[0])
        if rec is not None and rec.job.state.terminal:
            _stopped_after_the_end(executor, store, host, rec, r, parsed[2])
        elif trained and parsed[0] not in taken:
            entries = executor.hosts.hosts if executor.hosts is not None else ()
            trained += lost_steps_note(next((e for e in entries if e.name == host), None))
        store.add_event(now, "fence", f"stopped stale {r.job_id} generation {r.generation}{trained}", parsed[0], host)
    said_ended(store, host, jobs, now)
    reported = {(r.job_id, r.generation) for r in jobs}
    for run in executor.all_runs():
        for rank in run.on_host(host):
            if rank.state == "unknown" and (rank.agent_id, run.generation) not in reported:
                rank.state, rank.reason = "exited", "lost: the agent does not know this process"
                notes.append(f"{run.job_id} rank {rank.rank} is gone from {host}")
        if run.all_exited:
            executor._after_exit(run)
    return notes


def fenced_notes(host: str, fenced: dict[tuple[str, int], list[str]]) -> list[str]:
    """One notice per fenced job and generation: a host back with an 8-rank job's old copy gave
    eight, one per rank."""
    return [f"fenced stale {ids[0]} generation {gen} on {host}" if len(ids) == 1 else
            f"fenced stale {job_id} generation {gen} on {host} ({len(ids)} processes: {', '.join(sorted(ids))})"
            for (job_id, gen), ids in fenced.items()]


def _step_of(remote: RemoteJob) -> int | None:
    try:
        return int(float((remote.progress or {})["step"]))
    except (KeyError, TypeError, ValueError):
        return None


def lost_steps_note(entry: HostEntry | None) -> str:
    """What became of a fenced copy's extra steps. "Lost" was said where the newer generation had
    resumed from this copy's own later save, in the checkpoint directory the hosts share."""
    if entry is not None and entry.shared_fs:
        return ("; what it saved went to the checkpoint directory its hosts share (shared_fs), which the newer "
                "generation resumes from: only steps after its last save there are lost")
    return "; those steps are lost (the newer generation goes on from its own checkpoint)"


def _trained_on(store: Store, job_id: str, remote: RemoteJob) -> str:
    """What a stale copy had done that the job now lost: it trained on, cut off, past where the newer
    generation is (its steps were dropped with no word)."""
    try:
        step = int((remote.progress or {}).get("step"))
    except (TypeError, ValueError):
        return ""
    rec = store.job(job_id)
    if rec is None or step <= rec.job.steps_done:  # "run on to step 110, past the 110 on record"
        return ""
    if rec.job.state.terminal:  # cancelled while out of reach, or while no controller ran
        kept = " (its checkpoint there keeps them for a retry)" if remote.generation == rec.generation else ""
        # "after the job was cancelled" was wrong where most of those steps came before the cancel
        return (f": it had run on to step {step}, past the {rec.job.steps_done} on record, before the stop of the "
                f"{rec.job.state.value} job reached it{kept}")
    return f": it had trained on to step {step} while cut off from the controller, past the job's {rec.job.steps_done}"


def said_ended(store: Store, host: str, jobs: tuple[RemoteJob, ...], now: float) -> None:
    """An ended job whose run on ``host`` was "stopped when the host is back" and is reported
    exited: the stop was seen through while no controller watched (its agent kills at the end of
    the grace). The clause stayed in its message for good after a restart."""
    for r in jobs:
        parsed = parse_agent_id(r.job_id) if r.state == "exited" else None
        rec = store.job(parsed[0]) if parsed is not None else None
        if rec is None or not rec.job.state.terminal or r.generation != rec.generation:
            continue
        head, _, tail = rec.job.message.partition(UNREACHED)
        if tail and host in tail.split(" (out of reach)")[0].strip().split(", "):
            store.set_state(rec.job.id, rec.job.state, now, head)


def _stopped_after_the_end(executor: Executor, store: Store, host: str, rec, remote: RemoteJob, rank: int) -> None:
    """A run of an ended job stopped when its host (or the controller) was back: the job's own
    latest run keeps its last step and checkpoint host (a retry said "it had reached step 32300"
    and went on from 36001), and the message stops saying the run is still to be stopped."""
    if remote.generation != rec.generation:
        return
    step = _step_of(remote)
    if rank == 0 and step is not None and step > rec.job.steps_done:
        progress = remote.progress or {}
        store.update_progress(rec.job.id, step, float(progress.get("samples", 0) or 0), progress.get("checkpoint"))
        executor.checkpoints.remember(rec.job.id, host)
    if UNREACHED in rec.job.message:
        store.set_state(rec.job.id, rec.job.state, executor.clock(), rec.job.message.split(UNREACHED)[0])


def _never_launched_here(store: Store, parsed: tuple[str, str, int], generation: int) -> bool:
    """A generation a newer copy of this store launched: past this store's, and not so far past
    that no copy could have got there (see newer_copies.BELIEVED_AHEAD)."""
    rec = store.job(parsed[0])
    if generation > min((rec.generation if rec is not None else 0) + BELIEVED_AHEAD, MOST_BELIEVED):
        return False
    return rec is None or (parsed[1] == "r" and generation > rec.generation)


def _rank0_launched_on(store: Store, job_id: str, generation: int, host: str) -> bool:
    """Whether ``generation`` of the job had its rank 0 launched on ``host``: any agent learns the
    store's id at its hello, and a compromised host claimed a stale rank 0 of a job running
    elsewhere, far ahead; the job was stopped and went on from the host's planted checkpoint."""
    launched = store.last_allocation(job_id, generation)
    return launched is not None and launched[0].host_names[:1] == (host,)


def _finished_while_cut_off(store: Store, host: str, remote: RemoteJob) -> bool:
    """Rank 0 of a generation of an unfinished job, not the one this controller watches, ended
    with the done code past the job's target: it trained on, and finished, on a host cut off
    from the controller (a partition, a hung sshd) while a newer generation started elsewhere.

    Only on the host that generation's rank 0 was launched on: any agent learns the store's id
    at its hello, so a compromised host (or a state file restored from a backup) reported another
    host's job finished, and the job's real run was stopped and the job marked done for good."""
    parsed = parse_agent_id(remote.job_id)
    if parsed is None or parsed[1:] != ("r", 0) or remote.exit_code != EXIT_DONE or remote.signal is not None:
        return False
    rec = store.job(parsed[0])
    return (rec is not None and rec.job.state in (JobState.QUEUED, JobState.RUNNING, JobState.RESIZING)
            and _rank0_launched_on(store, parsed[0], remote.generation, host)
            and not ended_seen(store, parsed[0], remote.generation)
            and remote.generation <= rec.generation and reached_target(rec.job.spec, remote.progress))


async def _done_by_stale_copy(executor: Executor, store: Store, host: str, remote: RemoteJob, now: float) -> str:
    """Before, the finished copy was never looked at: the job trained again from an older
    checkpoint (from step 0 when the cut-off host's could not be copied)."""
    job_id = parse_agent_id(remote.job_id)[0]  # type: ignore[index]  # a "finished" verdict parsed it
    progress = remote.progress or {}
    step = int(float(progress.get("step", 0) or 0))
    said = (f"{job_id} generation {remote.generation} finished on {host} (step {step}) while {host} was cut off "
            "from the controller; its outputs are there")
    # its checkpoint and metrics are the finished copy's: they named the stopped newer run's, on another host
    store.update_progress(job_id, step, float(progress.get("samples", 0) or 0), progress.get("checkpoint"),
                          metrics=training_metrics(progress))
    executor.checkpoints.remember(job_id, host)
    run = executor.runs.get(job_id)
    store.try_set_state(job_id, JobState.DONE, now, said)
    store.add_event(now, "done", said + (f"; generation {run.generation} is stopped" if run else ""), job_id, host)
    if run is not None:
        await executor.stop_run(run, f"its generation {remote.generation} finished on {host}", wait=False)
    return said
