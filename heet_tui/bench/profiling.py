"""``heet-tui bench profiling``: accuracy of throughput completion on measured Sia-format profiles.

Builds the ground-truth tensor from a profile directory, runs the three held-out cases
(leave-one-job-out, leave-one-model-out, cold-type; see ``heet_tui.profiling.evaluation``) with
K sampler-chosen measurements, and prints median / p90 absolute percentage errors next to the
two baselines. Errors are fractions (0.08 = 8%).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from heet_tui.cli.errors import UsageError
from heet_tui.profiling.completion import FactorSettings, fit
from heet_tui.profiling.configs import config_features
from heet_tui.profiling.evaluation import CaseErrors, Evaluator
from heet_tui.profiling.ground_truth import build_ground_truth
from heet_tui.profiling.sia_format import ProfileFormatError, read_profiles

CASES = ("leave_one_job_out", "leave_one_model_out", "cold_type")
# The targets at K = 3: (median, p90 or None); every case also <= 0.6x the better baseline.
TARGETS = {"leave_one_job_out": (0.10, 0.25), "leave_one_model_out": (0.15, 0.35), "cold_type": (0.15, None)}
BASELINE_FACTOR = 0.6


def default_profiles() -> Path:
    shared = os.environ.get("HEET_SHARED")
    base = Path(shared) if shared else Path(__file__).resolve().parents[2].parent / "shared"
    return base / "data" / "profiles"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiling", help="accuracy of throughput prediction from a few profiling runs")
    p.add_argument("--profiles", type=Path, default=None,
                   help="Sia-format profile directory (default: $HEET_SHARED/data/profiles)")
    p.add_argument("--budget", type=int, default=3, help="measured cells per held-out job or type, K (default 3)")
    p.add_argument("--seeds", type=int, default=1, help="repeat with this many seeds and pool the errors (default 1)")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ", ".join(CASES))
    p.add_argument("--json", action="store_true", help="print JSON only")
    p.add_argument("--no-fit-timing", action="store_true",
                   help="leave out the timed fit of a 200-job x 5-type x 20-config tensor (three fits, seconds)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.profiles or default_profiles()
    if args.budget < 1 or args.seeds < 1:
        raise UsageError("--budget and --seeds must be at least 1")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise UsageError(f"unknown case {unknown[0]!r} (choose from {', '.join(CASES)})")
    if not Path(root).is_dir():
        raise UsageError(f"profile directory not found: {root} (pass --profiles DIR or set HEET_SHARED)")
    started = time.perf_counter()
    try:
        truth = build_ground_truth(read_profiles(Path(root)), Path(root))
    except ProfileFormatError as exc:
        raise UsageError(str(exc)) from None
    if len(truth.jobs) < 2:
        raise UsageError(f"{root}: need at least two jobs with measurements, found {len(truth.jobs)}")
    evaluator = Evaluator(truth, FactorSettings(), budget=args.budget)
    result: dict[str, dict] = {}
    for case in cases:
        pooled = CaseErrors()
        for seed in range(args.seeds):
            pooled.merge(getattr(evaluator, case)(seed))
        result[case] = pooled.summary()
        if not result[case]["cells_predicted"]:  # NaN figures (invalid JSON) and "MISSED" said nothing of why
            models = sorted({job.model for job in truth.jobs})
            result[case]["skipped"] = (f"needs at least two GPU types, {root} has {len(truth.gpu_types)}"
                                       if case == "cold_type" and len(truth.gpu_types) < 2 else
                                       # it said "a budget of 3 measures every cell" of one model's folder
                                       f"needs at least two models, {root} has one ({models[0]})"
                                       if case == "leave_one_model_out" and len(models) < 2 else
                                       f"nothing left to predict: a budget of {args.budget} measures every cell")
    elapsed = time.perf_counter() - started
    result["meta"] = {
        "profiles": str(root), "budget": args.budget, "seeds": args.seeds, "jobs": len(truth.jobs),
        "gpu_types": truth.gpu_types, "configs": len(truth.configs),
        "cells": int(np.isfinite(truth.values).sum()), "seconds": round(elapsed, 2),
        "targets_met": {c: meets_targets(c, result[c]) for c in cases if "skipped" not in result[c]}
        if args.budget == 3 else None,
    }
    wall, cpu = (None, None) if args.no_fit_timing else fit_seconds()
    result["meta"]["fit_seconds_200x5x20"] = None if wall is None else round(wall, 3)
    result["meta"]["fit_cpu_seconds_200x5x20"] = None if cpu is None else round(cpu, 3)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result, cases)
    return 0


def fit_seconds(jobs: int = 200, types: int = 5, repeats: int = 3) -> tuple[float, float]:
    """Median wall and CPU time of one fit on a fully observed synthetic jobs x types x 20-config
    tensor (CPU time as well because a shared machine's wall time says little)."""
    placements = [(1,), (2,), (4,), (8,), (1, 1), (2, 2), (4, 4), (8, 8), (4, 4, 4), (8, 8, 8), (2, 2, 2, 2),
                  (4, 4, 4, 4), (8, 8, 8, 8), (3,), (6,), (3, 3), (6, 6), (2, 1), (4, 2), (8, 4)]
    rng = np.random.default_rng(0)
    phi = config_features(placements)
    log_bsz = np.log(rng.integers(32, 4096, jobs).astype(float))
    shape = (jobs, types, len(placements))
    values = (rng.normal(0, 1, (jobs, 1, 1)) + rng.normal(0, 0.5, (1, types, 1))
              + np.einsum("jr,tr,cr->jtc", *(rng.normal(0, 0.5, (n, 3)) for n in shape))
              + rng.normal(0, 0.02, shape))
    idx = np.argwhere(np.ones(shape, dtype=bool))
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fit(idx, values.ravel(), shape, phi, log_bsz, FactorSettings())
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return float(np.median(wall)), float(np.median(cpu))


def meets_targets(case: str, summary: dict) -> bool:
    median_target, p90_target = TARGETS[case]
    ok = summary["median_ape"] <= median_target
    if p90_target is not None:
        ok = ok and summary["p90_ape"] <= p90_target
    return bool(ok and summary["median_ape"] <= BASELINE_FACTOR * summary["baseline_median_ape"])


def print_table(result: dict, cases: list[str]) -> None:
    meta = result["meta"]
    print(f"profiles {meta['profiles']}: {meta['jobs']} jobs x {len(meta['gpu_types'])} GPU types x "
          f"{meta['configs']} configs, {meta['cells']} measured cells; K={meta['budget']}, seeds={meta['seeds']}")
    print(f"{'case':<22}{'median':>9}{'p90':>9}{'scaling':>10}{'nearest':>10}{'cells':>8}  target")
    for case in cases:
        s = result[case]
        if "skipped" in s:
            print(f"{case:<22}skipped: {s['skipped']}")
            continue
        met = (meta["targets_met"] or {}).get(case)
        flag = "-" if met is None else ("met" if met else "MISSED")
        print(f"{case:<22}{s['median_ape']:>9.3f}{s['p90_ape']:>9.3f}{s['baseline_scaling_curve_median_ape']:>10.3f}"
              f"{s['baseline_nearest_job_median_ape']:>10.3f}{s['cells_predicted']:>8}  {flag}")
    by_type = result.get("cold_type", {}).get("median_ape_by_unit")
    if by_type:
        print("cold_type median by new type: " + ", ".join(f"{t} {e:.3f}" for t, e in by_type.items()))
    timed = meta["fit_seconds_200x5x20"]
    print(f"({meta['seconds']} s; errors are median/p90 absolute percentage errors as fractions"
          + (f"; one fit of a fully observed 200 x 5 x 20 tensor: {timed} s)" if timed is not None else ")"))
