"""Running jobs that stopped reporting progress: hung, not slow.

A training script can hang without exiting: a collective waiting for a peer that will never
come, a data loader blocked on a dead network filesystem, a rendezvous between hosts that
cannot reach each other's ``MASTER_PORT``. Before, such a job showed as running, with its last
progress, holding its GPUs until a person noticed. Now a run of a job whose rank 0 has printed
no ``@heet-progress`` line for the job's ``stall_timeout`` (default 30 minutes, counted from its
launch until the first line) is stopped and judged as a crash: retried with back-off, then
failed with its log's last lines, which show where it hung. A third of the way there, the job's
message says how long it has been silent, so a person sees it coming.

Profiling runs have their own, shorter limit (``unmeasured.py``); runs being stopped, and runs
on a host that dropped out (``host_grace.py`` decides those), are left alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from heet_tui.control.runtime import STALLED, Run
from heet_tui.core.durations import duration
from heet_tui.core.job import JobSpec

DEFAULT_STALL_S = 1800  # torch.distributed's own default collective timeout is also 30 minutes
QUIET_FRACTION = 1 / 3  # silence past this share of the limit is shown in the job's message
NONE_SEEN = "none since its launch"  # a stalled run that reported nothing while it ran
# a run a restarted controller found: what came before is not known, and it said "since its launch"
NONE_SINCE_FOUND = "none since this controller found it running"
BUFFERED = ("its progress lines reached its log only when it was stopped: its output is buffered (flush stdout "
            "after each line: print(..., flush=True)), or it prints them only when stopped (print one every few "
            "steps), docs/TRAINING.md")


def stall_limit(spec: JobSpec, default_s: float) -> float | None:
    """Seconds of silence after which the job counts as hung; None when the spec turns it off."""
    limit = default_s if spec.stall_timeout_s is None else spec.stall_timeout_s
    return float(limit) if limit > 0 else None


def silent_for(run: Run, now: float) -> float:
    """Seconds since rank 0's last progress line (since the launch, or the adoption, before one)."""
    return now - (run.progress_at if run.progress_at is not None else run.started_at)


def watched(run: Run) -> bool:
    """A run whose silence means something: training, not being stopped, every rank known to run."""
    return (not run.profiling and run.stop_reason is None and not run.any_exited
            and all(r.state == "running" for r in run.ranks.values()))


def stalled(runs: Iterable[Run], spec_of, now: float, default_s: float) -> list[tuple[Run, str]]:
    """(run, stop reason) for each watched run silent past its job's limit.

    ``spec_of(job_id)`` gives the job's spec, or None when it is not known.
    """
    found = []
    for run in runs:
        if not watched(run):
            continue
        spec = spec_of(run.job_id)
        limit = stall_limit(spec, default_s) if spec is not None else None
        if limit is not None and silent_for(run, now) >= limit:
            found.append((run, f"{STALLED}: no progress report in its stall_timeout of {duration(limit)} "
                               f"({last_seen(run)})"))
    return found


def quiet_note(run: Run | None, spec: JobSpec, now: float, default_s: float) -> str | None:
    """The running job's message while it has been silent a while but is not yet called hung."""
    if run is None or not watched(run):
        return None
    limit = stall_limit(spec, default_s)
    quiet = silent_for(run, now)
    if limit is None or quiet < limit * QUIET_FRACTION:
        return None
    return (f"no progress report for {duration(quiet)} ({last_seen(run)}); "
            f"stopped as hung at {duration(limit)} (stall_timeout)")


def quiet_message(run: Run, spec: JobSpec, now: float, default_s: float) -> str | None:
    """The note above as the store keeps it, written once: clock times, not a count that moves.
    Only the TUI said it, from its snapshot: ``heet-tui jobs`` and ``--json`` read "running on
    1xT4" for a job a minute from being stopped as hung."""
    if quiet_note(run, spec, now, default_s) is None:
        return None
    limit = stall_limit(spec, default_s)
    assert limit is not None  # a note means a limit
    since = now - silent_for(run, now)
    return (f"no progress report since {clock(since)} ({last_seen(run)}); stopped as hung at "
            f"{clock(since + limit)} unless one comes (stall_timeout {duration(limit)})")


def clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def last_seen(run: Run) -> str:
    if run.progress is None:
        return NONE_SINCE_FOUND if run.found_at_restart else NONE_SEEN
    return f"the last at step {run.progress.get('step', '?')}"
