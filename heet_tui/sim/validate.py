"""Check the simulator against the published reference results (``shared/data/reference``).

Two runs of ``rigid-fifo`` per reference file: *as described* (each job holds and trains on
its requested GPUs; profile physics as measured) and *reference-compatible* (each job trains
on one GPU with Sia's calibration slowdowns and 1-GPU accumulation rule), which is what the
reference figures turn out to contain; docs/SIMULATOR.md explains how that was established.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from heet_tui.sim.cluster_spec import load_cluster
from heet_tui.sim.errors import SimInputError
from heet_tui.sim.physics import load_physics
from heet_tui.sim.runner import RunSettings, simulate
from heet_tui.sim.workload import load_workload


def _compare(reference: dict, records: list) -> dict[str, object]:
    mine = {r.name: r.jct_s for r in records if r.jct_s is not None}
    ref_jobs = reference["jobs"]
    errors = [abs(mine[n] - v["jct_s"]) / v["jct_s"] for n, v in ref_jobs.items() if n in mine and v["jct_s"]]
    avg = float(np.mean(list(mine.values()))) if mine else None
    ref_avg = float(reference["avg_jct_s"])
    return {
        "avg_jct_s": avg,
        "ratio_to_reference": avg / ref_avg if avg else None,
        "within_10pct": bool(avg is not None and abs(avg / ref_avg - 1) <= 0.10),
        "jobs_compared": len(errors),
        "jobs_missing": sorted(set(ref_jobs) - set(mine)),
        "per_job_rel_error_median": float(np.median(errors)) if errors else None,
        "per_job_rel_error_max": float(np.max(errors)) if errors else None,
        "per_job_within_10pct": int(sum(e <= 0.10 for e in errors)),
    }


MODES = ("as_described", "reference_compat")


def validate_against_reference(data: Path, cluster_path: str, only: str = "",
                               modes: tuple[str, ...] = MODES, profiles: Path | None = None) -> dict[str, object]:
    """``only`` keeps reference files whose name contains it; ``modes`` picks the runs;
    ``profiles`` defaults to ``data / "profiles"``."""
    from heet_tui.scheduling.rigid_fifo import RigidFifoPolicy

    ref_dir = data / "reference"
    refs = sorted(p for p in ref_dir.glob("rigid-fifo-*.json") if only in p.stem)
    if not refs:
        raise SimInputError(f"{ref_dir}: no rigid-fifo-*.json reference files")
    cluster = load_cluster(cluster_path)
    report: dict[str, object] = {}
    for path in refs:
        try:
            reference = json.loads(path.read_text(encoding="utf-8"))
            workload_path = data / reference["workload"]
        except (OSError, ValueError, KeyError) as exc:
            raise SimInputError(f"{path}: not a reference file: {exc}") from None
        jobs = load_workload(workload_path)
        models = {j.application for j in jobs}
        physics = {mode: load_physics(profiles or data / "profiles", cluster, models=models,
                                      one_gpu_accumulates=mode == "reference_compat") for mode in modes}
        entry: dict[str, object] = {"workload": reference["workload"], "reference_avg_jct_s": reference["avg_jct_s"]}
        for mode, phys in physics.items():
            settings = RunSettings(oracle=True, reference_compat=mode == "reference_compat")
            run = simulate(cluster, phys, jobs, RigidFifoPolicy(), settings, label=str(workload_path))
            entry[mode] = _compare(reference, run.records)
        report[path.stem] = entry
    return report
