"""``heet-tui jobs NAME``: one job in full, from the state store.

The table of ``heet-tui jobs`` has one line per job; a user whose job failed, waits or runs
slower than expected wants the rest: what was asked for, where it got to, when it changed
state and what the controller recorded about it (a failure's log tail is in its events).
"""

from __future__ import annotations

import json
import shlex
import sys
import time

from heet_tui.cli.errors import UsageError
from heet_tui.cli.names import known_names
from heet_tui.cli.printable import printable
from heet_tui.control.checkpoint_dirs import HOSTS_SETTING
from heet_tui.control.codec import spec_to_obj
from heet_tui.control.profiling_cost import ProfilingCost, profiling_costs
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store
from heet_tui.control.store_allocations import Placed
from heet_tui.control.store_records import EventRecord, JobRecord
from heet_tui.control.user_constraints import user_constraints
from heet_tui.core.allocation import Allocation
from heet_tui.core.durations import duration
from heet_tui.core.job import RETRYABLE, JobState, count_text, gpu_span
from heet_tui.core.metrics import describe
from heet_tui.core.sched_input import Constraints


def job_row(rec: JobRecord, alloc: tuple[Allocation, int] | None, checkpoint_hosts: dict[str, str],
            held_gpu_s: float = 0.0) -> dict:
    """A job as ``heet-tui jobs --json`` lists it (``checkpoint_hosts``: the store's job -> host of
    its latest checkpoint, and ``held_gpu_s`` its GPU time held, read once for a listing)."""
    job, spec = rec.job, rec.job.spec
    ended_at = job.ended_at
    return {
        "id": job.id, "name": spec.name, "state": job.state.value, "steps": job.steps_done,
        "samples": job.samples_done, "target": {"kind": spec.target.kind.value, "value": spec.target.value},
        "gpus": f"{spec.min_gpus}-{spec.max_gpus}", "min_gpus": spec.min_gpus, "max_gpus": spec.max_gpus,
        "priority": spec.priority,  # why one job waits while another runs: it was in jobs NAME alone
        "allocation": alloc[0].describe() if alloc else None,
        # what "2xT4 on h[0,1]" says, as data: a script had to parse the text for the type and hosts
        "gpu_type": alloc[0].gpu_type if alloc else None, "num_gpus": alloc[0].num_gpus if alloc else 0,
        "hosts": {h: list(ix) for h, ix in alloc[0].hosts} if alloc else {},
        "generation": rec.generation, "restarts": job.restarts, "checkpoint": rec.checkpoint,
        # the path alone was no use to a script that fetches it: hosts share no filesystem
        "checkpoint_host": checkpoint_host(rec, alloc, checkpoint_hosts) if rec.checkpoint else None,
        "submitted_at": job.submitted_at, "message": job.message, "cancel_requested": rec.cancel_requested,
        "ended_at": ended_at, "jct_s": None if ended_at is None else round(ended_at - job.submitted_at, 3),
        "metrics": dict(job.metrics), "spec_file": rec.spec_file or None,
        # the GPU time its runs reported training, profiling apart (it was in the store only)
        "gpu_s": round(job.attained_gpu_s, 3),
        # GPUs x time its runs held them, launch to release: what a lab bills (gpu_s was 27-83 % of it)
        "held_gpu_s": round(held_gpu_s, 3),
    }


def job_named(store: Store, name: str) -> JobRecord:
    """The job ``name`` means (an id, else the newest job of that name), or a usage error listing
    the active ones."""
    rec = store.find_job(name)
    if rec is None:
        known = known_names([r.job.id for r in store.jobs(include_terminal=False)], name, "active jobs")
        raise UsageError(f'no job "{name}" ({known})')
    if rec.job.id == name and rec.job.ended_at is not None:
        # the spec submitted again since: `submit x.toml; log -f x` followed the old job, and cancel x
        # the new one; said, the old one being reachable by this name alone
        newer = [r.job for r in store.jobs() if r.job.spec.name == rec.job.spec.name and r.job.id != rec.job.id
                 and r.job.submitted_at > rec.job.ended_at]
        if newer:
            print(f"heet-tui: {name} is the job of that id, {rec.job.state.value}; {newer[-1].id}, of the same name "
                  f"and submitted since, is {newer[-1].state.value}: give its id for it", file=sys.stderr)
    return rec


def show_job(store: Store, name: str, as_json: bool, events: int) -> int:
    rec = job_named(store, name)
    job, spec = rec.job, rec.job.spec
    alloc = store.current_allocations().get(job.id)
    found = store.events(job.id, limit=max(1, events))
    if as_json:
        cost = profiling_costs(store).get(job.id, ProfilingCost())
        held = store.held_gpu_seconds(time.time(), job.id).get(job.id, 0.0)
        print(json.dumps({**job_row(rec, alloc, stored_checkpoint_hosts(store), held),
                          "profiling": {"runs": cost.runs, "gpu_s": round(cost.gpu_s, 3)},
                          "runs": [_placed_obj(p) for p in store.allocation_history(job.id)],
                          **_latest_speed(store, job.id, alloc),
                          "measured": _measured_rows(store, job.id), "spec": spec_to_obj(spec), "crashes": rec.crashes,
                          "history": [{"at": at, "state": state.value} for at, state in job.history],
                          # how many there are: a script took the latest 20 for all (--events N gives more)
                          "events_total": store.event_count(job.id),
                          "events": [_event_obj(e) for e in found]}, indent=2))
        return 0
    now = time.time()
    stale = not job.state.terminal and controller_running(store.dir) is None  # "running" as last recorded
    print(f"{job.id}  {job.state.value}" + ("  (cancel requested)" if rec.cancel_requested and not job.state.terminal
                                            else "") + ("  (as last recorded: no controller runs)" if stale else ""))
    fields = [
        ("command", shlex.join(spec.command) + (f"   (in {spec.workdir})" if spec.workdir else "")),
        ("spec file", rec.spec_file or "-"),
        ("class", f"model {spec.model}, batch {spec.batch_size}"),
        ("gpus", f"{gpu_span(spec.min_gpus, spec.max_gpus)}, " + (", ".join(spec.gpu_types) if spec.gpu_types else "any type")
         + (f", priority {spec.priority}" if spec.priority else "")),
        ("progress", _progress(rec)),
        ("reported", describe(job.metrics) or "-"),
        ("now", f"{alloc[0].describe()} (generation {alloc[1]}{'; ' + r if (r := alloc[0].ranks_on_hosts()) else ''})"
         if alloc else _last_ran(store, job.id)),
        ("speed", _speed(store, job.id)),
        ("measured", _measured(store, job.id)),
        ("gpu time", _gpu_time(store, rec)),
        ("profiling", profiling_costs(store).get(job.id, ProfilingCost()).describe()),
        ("restarts", f"{job.restarts}" + (f", {rec.crashes} crash(es) since the last new step" if rec.crashes else "")),
        ("checkpoint", _checkpoint(store, rec, alloc)),
        ("submitted", f"{_clock(job.submitted_at)} ({duration(now - job.submitted_at)} ago)"),
        ("history", "  ".join(f"{_clock(at)} {state.value}" for at, state in job.history)),
        ("message", job.message or "-"),
    ]
    if job.ended_at is not None:
        fields.insert([label for label, _ in fields].index("history"),
                      ("took", _took(job.ended_at, job.submitted_at, job.history)))
    if edited := user_constraints(store).get(job.id, Constraints()).describe():
        fields.insert(4, ("your edit", f"{edited} (fixed on the Plan screen; plans keep to it until d on the "
                                       "Jobs screen drops it)"))
    for label, value in fields:  # the spec's own text too: an escape in an argument retitled the terminal
        print(f"  {label:<10} {printable(value).replace(chr(10), chr(92) + 'n')}")  # a path's newline too
    total = store.event_count(job.id)
    print(("events:" if len(found) == total else f"events (the latest {len(found)} of {total}; --events N for more):")
          if found else "no events")
    for e in found:
        lines = e.message.splitlines() or [""]
        where = f" [{e.host}]" if e.host else ""
        print(f"  {_clock(e.at)} {e.kind:<10} {printable(lines[0])}{where}")
        for more in lines[1:]:
            print(f"  {'':<8} {'':<10} {printable(more)}")
    return 0


def _checkpoint(store: Store, rec: JobRecord, alloc: tuple[Allocation, int] | None) -> str:
    """Where the latest checkpoint is: its path on the host rank 0 ran on (the same path may hold an
    older one on other hosts that share no filesystem with it)."""
    path = rec.checkpoint or rec.job.spec.checkpoint_dir
    if not path:
        return "none reported yet"
    host = checkpoint_host(rec, alloc, stored_checkpoint_hosts(store))
    return path + (f"   (on {host})" if host else "")


def stored_checkpoint_hosts(store: Store) -> dict[str, str]:
    return json.loads(store.setting(HOSTS_SETTING) or "{}")


def checkpoint_host(rec: JobRecord, alloc: tuple[Allocation, int] | None, stored: dict[str, str]) -> str | None:
    """The host of rank 0 while the job runs (it writes the next checkpoint), else the one the
    store remembers."""
    return alloc[0].hosts[0][0] if alloc else stored.get(rec.job.id)


def _gpu_time(store: Store, rec: JobRecord) -> str:
    held = store.held_gpu_seconds(time.time(), rec.job.id).get(rec.job.id, 0.0)
    if not held:
        return "-"
    return (f"{duration(held)} of GPU time held (GPUs x time, launch to release), {duration(rec.job.attained_gpu_s)} "
            "of it reported training")


def _progress(rec: JobRecord) -> str:
    job, spec = rec.job, rec.job.spec
    target = spec.target_samples
    share = f" ({100 * job.samples_done / target:.0f}% of the target)" if target else ""
    steps = f"{job.steps_done:,} step" + ("s" if job.steps_done != 1 else "")
    # :g printed 2.51917e+06 samples beside "126080 samples" earlier
    return f"{steps}, {count_text(job.samples_done)} samples{share}; target {spec.target.describe()}"


def _clock(at: float) -> str:
    """Time of day, with the date when it is not today's."""
    local, today = time.localtime(at), time.localtime()
    same_day = local[:3] == today[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", local)


def _event_obj(e: EventRecord) -> dict:
    return {"at": e.at, "kind": e.kind, "host": e.host, "message": e.message}


def _last_ran(store: Store, job_id: str) -> str:
    """Where a job holding no GPUs last ran (the hosts its logs and checkpoint are on)."""
    last = store.last_allocation(job_id)
    return f"-   (last ran on {last[0].describe()}, generation {last[1]})" if last else "-"


def _speed(store: Store, job_id: str) -> str:
    """The latest samples/s its running processes reported, and where: the TUI shows it live,
    and neither jobs nor jobs NAME did."""
    found = [o for o in store.observations(job_id) if o[5] == "running"]
    if not found:
        return "-"
    _, gpu_type, placement, rate, at, _ = found[-1]
    per_host = placement.split("-") if "-" in placement else list(placement)  # "22": 2 GPUs on each of 2 hosts
    return f"{rate:,.1f} samples/s on {'+'.join(per_host)}x{gpu_type} (reported {_clock(at)})"


def _measured(store: Store, job_id: str) -> str:
    """Every configuration the job was measured on, its latest figure and by what: profiled values
    were on the TUI's Profiles screen only, and `jobs NAME` said "speed -" until the job ran."""
    return ", ".join(f"{'+'.join(map(str, m['per_host']))}x{m['gpu_type']} {m['samples_per_s']:,.0f}/s ({m['source']})"
                     for m in _measured_rows(store, job_id)) or "-"


def _measured_rows(store: Store, job_id: str) -> list[dict]:
    """The latest figure of each configuration the job was measured on, as ``jobs NAME --json``
    gives them: a script could not compare predictions with measurements once the job ended."""
    latest: dict[tuple[str, str], tuple[float, float, str]] = {}
    for _, gpu_type, placement, rate, at, source in store.observations(job_id):
        latest[(gpu_type, placement)] = (rate, at, source)
    return [{"gpu_type": t, "per_host": [int(n) for n in (p.split("-") if "-" in p else list(p))],
             "samples_per_s": round(rate, 3), "at": at, "source": source}
            for (t, p), (rate, at, source) in sorted(latest.items())]


def _took(ended_at: float, submitted_at: float, history: tuple[tuple[float, JobState], ...]) -> str:
    """Submission to end (the JCT), and for a retried job the part since its last retry: a job
    that sat failed over a weekend "took 2d03h" for two hours of training."""
    took = duration(ended_at - submitted_at)
    retried = [at for (_, before), (at, state) in zip(history, history[1:], strict=False)
               if before in RETRYABLE and state is JobState.QUEUED]
    return f"{took} ({duration(ended_at - retried[-1])} of it since its retry)" if retried else took


def _placed_obj(p: Placed) -> dict:
    """One generation's placement as ``jobs NAME --json`` gives it: a finished job's GPU types and
    hosts were in event text only."""
    a = p.allocation
    return {"generation": p.generation, "gpu_type": a.gpu_type, "num_gpus": a.num_gpus,
            "hosts": {h: list(ix) for h, ix in a.hosts}, "started_at": p.started_at, "released_at": p.released_at}


def _latest_speed(store: Store, job_id: str, alloc: tuple[Allocation, int] | None) -> dict:
    """What ``jobs --json`` lists as the job's latest speed: ``jobs NAME --json`` had neither key."""
    latest = store.latest_observation(job_id, "running", store.current_starts().get(job_id, 0.0)) if alloc else None
    return {"samples_per_s": round(latest[3], 3) if latest else None, "samples_per_s_at": latest[4] if latest else None}
