"""``heet-tui sim bound``: the lowest average JCT any policy could reach, per workload file."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heet_tui.cli.arg_types import finite_float
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.output_paths import check_output_path
from heet_tui.cli.split_table import print_table


def register_verb(verbs: argparse._SubParsersAction) -> None:
    """`sim bound` (named so that the command discovery, which takes every `register`, skips it)."""
    b = verbs.add_parser(
        "bound", help="a lower bound on the average JCT any policy can reach (LP relaxation)",
        description="Solve the relaxation of each workload's whole run (sim/bound.py): free, instant "
                    "reconfiguration and time-sharing, known arrivals and sizes, only per-type GPU counts "
                    "as limits. No policy's average JCT in `heet-tui sim` can be lower. Minutes per "
                    "160-job workload.")
    b.add_argument("--workload", required=True, metavar="FILE|DIR", help="workload CSV, or a directory of them")
    b.add_argument("--cluster", dest="bound_cluster", metavar="FILE", help="cluster TOML (default: bundled)")
    b.add_argument("--profiles", dest="bound_profiles", required=True, metavar="DIR",
                   help="Sia-format profile directory")
    b.add_argument("--cluster-scale", dest="bound_scale", type=int, default=1, metavar="N",
                   help="multiply every node count by N")
    b.add_argument("--placements", choices=("any", "packed"), default="any",
                   help="any placement the hosts allow (a bound for every policy, the default) or the "
                        "packed ones goodput-mip and the baselines evaluate (heet also prices spread ones)")
    b.add_argument("--batch", choices=("fixed", "adaptive"), default="fixed",
                   help="the workload's batch sizes, as the simulator runs them (default), or any validated "
                        "batch per configuration and epoch: what batch-size adaptation could at most give")
    b.add_argument("--interval", dest="bound_interval", type=finite_float, default=60.0, metavar="S",
                   help="the simulator's round length (default 60)")
    b.add_argument("--against", metavar="SIM.json",
                   help="a `heet-tui sim --json` result for the same files: print each policy's ratio to the bound")
    b.add_argument("--json", dest="bound_json", metavar="FILE", help="write the bounds as JSON")
    b.set_defaults(func=cmd_bound)


def _against(path: str, gpus: int, jobs: dict[str, int],
             interval_s: float) -> dict[str, dict[str, tuple[float, float | None]]]:
    """Policy -> workload label -> (avg JCT, jobs done) from a sim JSON file made on a cluster of ``gpus`` GPUs,
    with rounds of ``interval_s``, for workloads among ``jobs`` (label -> job count): one made on a
    bigger cluster showed a policy at 0.42x the bound, one with 60 s rounds against a 600 s bound
    at 0.68x, and another file of the same name at 16.7x."""
    labels = set(jobs)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"sim bound: --against {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"sim bound: --against {path}:{exc.lineno}: not JSON: {exc.msg}") from None
    out: dict[str, dict[str, tuple[float, float | None]]] = {}
    for policy, entry in (data.items() if isinstance(data, dict) else ()):
        files = entry.get("files") if isinstance(entry, dict) else None
        if isinstance(files, dict):
            out[policy] = {label: (m["avg_jct_s"], m.get("jobs_done") if isinstance(m.get("jobs_done"), int | float)
                                   else None)
                           for label, m in files.items()
                           if isinstance(m, dict) and isinstance(m.get("avg_jct_s"), int | float)}
    if not out:
        raise UsageError(f"sim bound: --against {path}: no per-file results (write it with `heet-tui sim --json`)")
    ran_on = {e["run"].get("gpus") for e in data.values() if isinstance(e, dict) and isinstance(e.get("run"), dict)}
    if ran_on - {None, gpus}:
        raise UsageError(f"sim bound: --against {path}: simulated on {', '.join(map(str, sorted(ran_on - {None})))} "
                         f"GPUs, the bound is for {gpus}: give the --cluster and --cluster-scale of that run")
    named = sorted({label for files in out.values() for label in files})
    if not labels & set(named):
        raise UsageError(f"sim bound: --against {path}: results for {', '.join(named)}, not for "
                         f"{', '.join(sorted(labels))}: give the --workload of that run")
    runs = [e["run"] for e in data.values() if isinstance(e, dict) and isinstance(e.get("run"), dict)]
    if rounds := sorted({r.get("interval_s") for r in runs} - {None, interval_s}):
        raise UsageError(f"sim bound: --against {path}: simulated with rounds of "
                         f"{', '.join(f'{r:g}' for r in rounds)} s, the bound is for {interval_s:g} s: give that "
                         "run's --interval")
    for entry in data.values():
        for label, m in (entry.get("files") or {}).items() if isinstance(entry, dict) else ():
            if label in jobs and isinstance(m, dict) and isinstance(m.get("jobs"), int) and m["jobs"] != jobs[label]:
                raise UsageError(f"sim bound: --against {path}: its {label} held {m['jobs']} jobs, this one holds "
                                 f"{jobs[label]}: not the same workload")
    return out


def cmd_bound(args: argparse.Namespace) -> int:
    from heet_tui.cli.commands.sim import load_inputs
    from heet_tui.sim.bound import BoundSettings, lower_bound
    from heet_tui.sim.errors import SimInputError
    from heet_tui.sim.runner import workload_labels
    from heet_tui.sim.workload import load_workload, workload_files

    if args.bound_interval <= 0 or args.bound_scale < 1:
        raise UsageError("sim bound: --interval must be positive and --cluster-scale at least 1")
    check_output_path("sim bound", "--json", args.bound_json)
    try:
        paths = workload_files(args.workload)
        workloads = {str(p): load_workload(p) for p in paths}
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    models = {j.application for jobs in workloads.values() for j in jobs}
    cluster, physics = load_inputs(args.bound_cluster, args.bound_profiles, models=models)
    try:
        cluster = cluster.scaled(args.bound_scale)
    except ValueError as exc:
        raise UsageError(f"sim bound: --cluster-scale: {exc}") from None
    labels = workload_labels(list(workloads))
    counts = {labels[path]: len(jobs) for path, jobs in workloads.items()}
    against = _against(args.against, cluster.total_gpus, counts, args.bound_interval) if args.against else {}
    settings = BoundSettings(interval_s=args.bound_interval, placements=args.placements, batch=args.batch)
    report: dict[str, Any] = {"placements": args.placements, "batch": args.batch, "cluster": cluster.name,
                              "files": {}}
    failed: list[str] = []
    for path, jobs in workloads.items():
        if sys.stderr.isatty():
            print(f"solving {labels[path]} ({len(jobs)} jobs) ...", file=sys.stderr, flush=True)
        try:
            result = _solved_unless_interrupted(labels[path], lambda jobs=jobs: lower_bound(cluster, physics, jobs,
                                                                                            settings))
        except ValueError as exc:  # keep the other files' bounds: each takes minutes
            failed.append(f"sim bound: {labels[path]}: {exc}")
            report["files"][labels[path]] = {"error": str(exc), "jobs": len(jobs)}
            continue
        entry: dict[str, Any] = {
            "bound_avg_jct_s": round(result.avg_jct_s, 1), "alone_avg_jct_s": round(result.alone_avg_jct_s, 1),
            "jobs": result.jobs, "unschedulable": list(result.unschedulable),
            "lp_variables": result.variables, "solve_s": round(result.solve_s, 1),
        }
        ratios, short = _ratios(against, labels[path], result.avg_jct_s, result.jobs)
        if ratios:
            entry["policy_over_bound"] = ratios
        if short:
            entry["policy_not_comparable"] = short
        report["files"][labels[path]] = entry
    bounds = [e["bound_avg_jct_s"] for e in report["files"].values() if "error" not in e]
    report["mean_bound_avg_jct_s"] = round(sum(bounds) / len(bounds), 1) if bounds else None
    _print(report)
    if args.bound_json:
        try:
            Path(args.bound_json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CliError(f"sim bound: {args.bound_json}: {exc.strerror or exc}") from None
    if failed:
        raise CliError("; ".join(failed))
    return 0


def _solved_unless_interrupted(label: str, solve: Callable[[], Any]) -> Any:
    """The solver is C code that never looks for a signal: Ctrl-C waited for the LP to finish (minutes).
    It runs in a thread of its own, and Ctrl-C ends the process at once (nothing is written yet)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = solve()
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="sim-bound-solve", daemon=True)
    try:  # started inside: a Ctrl-C just after the start was a bare exit 130, unsaid
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        print(f"heet-tui sim bound: interrupted while solving {label}: no results written", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)  # a thread inside the solver cannot be stopped, and would hold the exit until it ends
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _ratios(against: dict[str, dict[str, tuple[float, float | None]]], label: str, bound_s: float,
            bound_jobs: int) -> tuple[dict[str, float | None], dict[str, str]]:
    """Each policy's average JCT over the bound, and why a ratio is left out: a policy that left
    jobs unfinished averages fewer jobs than the bound does, and read 0.50x a lower bound."""
    ratios: dict[str, float | None] = {}
    short: dict[str, str] = {}
    for policy, files in against.items():
        if label not in files:
            continue
        avg, done = files[label]
        if done is not None and done < bound_jobs:
            ratios[policy] = None
            short[policy] = f"finished {done:g} of the {bound_jobs} jobs the bound covers: its average is of fewer jobs"
        else:
            ratios[policy] = round(avg / bound_s, 3)
    return ratios, short


def _print(report: dict[str, Any]) -> None:
    policies = sorted({p for e in report["files"].values() for p in e.get("policy_over_bound", {})})
    columns = ("workload", "jobs", "bound h", "alone h", "LP vars", "solve s", *(f"{p} / bound" for p in policies))
    rows = []
    for label, e in report["files"].items():
        if "error" in e:
            rows.append((label, str(e["jobs"]), f"failed: {e['error']}", *("",) * (len(columns) - 3)))
            continue
        ratios = e.get("policy_over_bound", {})
        rows.append((label, str(e["jobs"]), f"{e['bound_avg_jct_s'] / 3600:.3f}", f"{e['alone_avg_jct_s'] / 3600:.3f}",
                     f"{e['lp_variables']:,}", f"{e['solve_s']:.0f}",
                     *(_ratio_cell(ratios, e.get("policy_not_comparable", {}), p) for p in policies)))
    print_table(f"lower bound on average JCT, {report['cluster']}, placements: {report['placements']}, "
                f"batch: {report['batch']}", columns, rows)
    for label, e in report["files"].items():
        for policy, why in sorted(e.get("policy_not_comparable", {}).items()):
            print(f"{label}: {policy} not compared: {why}")


def _ratio_cell(ratios: dict[str, float | None], short: dict[str, str], policy: str) -> str:
    if policy in short:
        return "n/a"
    value = ratios.get(policy)
    return "-" if value is None else f"{value:.2f}"
