"""Per-run metrics and their mean/std over the files of a workload directory."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from heet_tui.sim.engine import JobRecord, RoundStats

METRICS = ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "gpu_hours_per_job", "restarts_per_job",
           "utilization", "sched_ms_p50", "sched_ms_p95")


def _pct(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def summarize(records: Sequence[JobRecord], stats: RoundStats, total_gpus: int) -> dict[str, float | int | None]:
    """JCTs over completed jobs; makespan from the first submission to the last completion;
    utilisation = GPU-seconds held / (GPUs x makespan)."""
    done = [r for r in records if r.jct_s is not None]
    jcts = [r.jct_s for r in done if r.jct_s is not None]
    first = min((r.submitted_at for r in records), default=0.0)
    last = max((r.finished_at for r in done if r.finished_at is not None), default=first)
    makespan = last - first if done else None
    gpu_s = sum(r.gpu_seconds for r in records)
    n = len(records)
    return {
        "avg_jct_s": float(np.mean(jcts)) if jcts else None,
        "p50_jct_s": _pct(jcts, 50),
        "p99_jct_s": _pct(jcts, 99),
        "makespan_s": makespan,
        "gpu_hours_per_job": gpu_s / 3600.0 / n if n else None,
        "restarts_per_job": sum(r.restarts for r in records) / n if n else None,
        "utilization": gpu_s / (total_gpus * makespan) if makespan and total_gpus else None,
        "sched_ms_p50": _pct(stats.sched_ms, 50),
        "sched_ms_p95": _pct(stats.sched_ms, 95),
        "jobs": n,
        "jobs_done": len(done),
        "jobs_unschedulable": sum(1 for r in records if r.outcome == "unschedulable"),
    }


def aggregate(per_file: dict[str, dict[str, float | int | None]]) -> dict[str, object]:
    """Mean of every metric over files, with ``std`` (population) alongside and the files kept."""
    out: dict[str, object] = {}
    std: dict[str, float | None] = {}
    keys = list(METRICS) + ["jobs", "jobs_done", "jobs_unschedulable"]
    for key in keys:
        values = [v[key] for v in per_file.values() if v.get(key) is not None]
        values = [float(x) for x in values if isinstance(x, int | float) and math.isfinite(float(x))]
        out[key] = float(np.mean(values)) if values else None
        std[key] = float(np.std(values)) if values else None
    out["std"] = std
    out["files"] = per_file
    return out
