"""What restarting a job costs, measured on the job itself.

Every resize or move pauses a job: its processes checkpoint and exit on SIGTERM (the stop),
then the new ones import, form the process group, load the checkpoint and warm up (the
start). Plans weigh a move's gain against that pause, so a wrong pause is a wrong plan: a
fixed 30 s kept a 2-minute job on 4 slow T4s next to two idle A100s (its real pause was
about 4 s), and would let a job whose checkpoint takes five minutes to load be moved for a gain of
one. Profiling runs are launched and stopped like any run, so a job's pause is known before
its first plan.

- start: at a run's second progress report, the time since launch less the time the samples
  done since launch take at the reported speed (the first report includes start-up and
  warm-up, which is why observations skip it too);
- stop: from the controller's first SIGTERM to the last rank's exit.

A job's cost is the median of its latest measurements of each phase; until a start is
measured, ``DEFAULT_RESTART_S``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from heet_tui.control.runtime import STALLED

if TYPE_CHECKING:
    from heet_tui.control.runtime import Run
    from heet_tui.control.store import Store
    from heet_tui.control.throughput import ProfileClass

DEFAULT_RESTART_S = 30.0
RECENT = 5  # measurements per phase that count: a job's start-up changes little, but hosts differ
ENDED_ROWS = 2000  # the ended jobs' latest measurements read each round: recent twins, at a bounded cost


def start_seconds(run: Run, progress: dict[str, Any], now: float) -> float | None:
    """The start-up part of a run's pause, from its second report; None when it cannot be told
    (a run adopted from an earlier controller: its launch time is not known)."""
    if run.start_samples is None or run.reports != 2:
        return None
    try:
        samples, rate = float(progress["samples"]), float(progress["samples_per_s"])
    except (KeyError, TypeError, ValueError):
        return None
    if rate <= 0 or samples < run.start_samples:
        return None
    return max(0.0, (now - run.started_at) - (samples - run.start_samples) / rate)


def stop_seconds(run: Run, now: float) -> float | None:
    """How long the run took to end after the controller's first SIGTERM; None when it was not
    stopped, or when a rank's end was never seen (its host was lost). A rank killed at the end
    of the grace period counts: that slow stop is what the job costs. A hung run's kill does not:
    a healthy stop of the job is not that slow."""
    if run.stop_sent_at is None or run.stop_reason is None or run.stop_reason.startswith(("host", STALLED)):
        return None
    if any(r.reason and r.reason.startswith("lost") for r in run.ranks.values()):
        return None
    return max(0.0, now - run.stop_sent_at)


def restart_costs(store: Store) -> dict[str, float]:
    """Per job that has not ended and has a measured start: median recent start + median
    recent stop, in seconds (ended jobs are left out: every round asks)."""
    return _costs(store.restart_times())


def ended_twin_costs(store: Store) -> dict[ProfileClass, float]:
    """Per (model, batch size): the median pause of the recently ended jobs of that class. A
    sweep's later members share the first ones' pause, also once those have finished (they were
    priced at the default 30 s for a 3 s pause)."""
    classes: dict[str, ProfileClass] = {}
    rows = []
    for job_id, model, batch, phase, seconds in store.ended_restart_times(ENDED_ROWS):
        classes[job_id] = (model, batch)
        rows.append((job_id, phase, seconds))
    per_class: dict[ProfileClass, list[float]] = {}
    for job_id, cost in _costs(rows).items():
        per_class.setdefault(classes[job_id], []).append(cost)
    return {cls: statistics.median(costs) for cls, costs in per_class.items()}


def _costs(rows: Iterable[tuple[str, str, float]]) -> dict[str, float]:
    phases: dict[str, dict[str, list[float]]] = {}
    for job_id, phase, seconds in rows:
        phases.setdefault(job_id, {}).setdefault(phase, []).append(seconds)
    out = {}
    for job_id, by_phase in phases.items():
        if "start" not in by_phase:
            continue
        out[job_id] = sum(statistics.median(by_phase[p][-RECENT:]) for p in ("start", "stop") if p in by_phase)
    return out


def cost_of(job_id: str, costs: dict[str, float], class_mates: set[str],
            default: float | None = DEFAULT_RESTART_S, ended_twins: float | None = None) -> float | None:
    """The job's own measured pause, else the median of its profile class's (twins load the same
    checkpoint the same way; a twin that was never profiled has none of its own), else that of its
    class's ended jobs (``ended_twins``, from :func:`ended_twin_costs`), else the default."""
    if job_id in costs:
        return costs[job_id]
    mates = [costs[m] for m in class_mates if m in costs]
    if mates:
        return statistics.median(mates)
    return ended_twins if ended_twins is not None else default
