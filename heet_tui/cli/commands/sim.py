"""``heet-tui sim``: compare policies on a simulated cluster; ``sim generate``; ``sim validate``;
``sim bound`` (in ``sim_bound``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import textwrap
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heet_tui.cli.arg_types import finite_float, seed
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.output_paths import check_distinct, check_output_path
from heet_tui.cli.split_table import print_table

if TYPE_CHECKING:
    from heet_tui.sim.physics import Physics
    from heet_tui.sim.workload import WorkloadJob

DEFAULT_POLICIES = "heet,fifo,gavel,srtf,goodput-mip"


def _bundled_cluster() -> str:
    return str(files("heet_tui.bundled_configs.sim").joinpath("sia-64gpu.toml"))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="simulate policies on a cluster and workload from measured profiles",
                       description="Run each policy over a workload (a CSV or a directory of CSVs) on a "
                                   "simulated cluster and print avg/p50/p99 JCT, makespan, GPU-hours, restarts, "
                                   "utilisation and scheduler time per round.")
    p.add_argument("--workload", metavar="FILE|DIR", help="workload CSV, or a directory of them")
    p.add_argument("--cluster", metavar="FILE", help="cluster TOML (default: bundled sia-64gpu.toml)")
    p.add_argument("--profiles", metavar="DIR",
                   help="Sia-format profile directory (one folder per model); required, e.g. ../shared/data/profiles")
    p.add_argument("--cluster-scale", type=int, default=1, metavar="N",
                   help="multiply every node count of the cluster by N (e.g. 32: the 64-GPU mix at 2,048 GPUs)")
    p.add_argument("--policy", default=DEFAULT_POLICIES, help=f"comma-separated policies (default: {DEFAULT_POLICIES})")
    p.add_argument("--interval", type=finite_float, default=60.0, metavar="S", help="round length in seconds (default 60)")
    p.add_argument("--oracle", action="store_true", help="policies see true throughput instead of predictions")
    p.add_argument("--predictor", choices=("model", "simple"), default=None,
                   help="without --oracle: the profiling model (default) or a simple power-law predictor")
    p.add_argument("--seed", type=seed, default=0, help="seed for profiling noise (default 0; runs are deterministic per seed)")
    p.add_argument("--json", metavar="FILE", help="write the metrics as JSON")
    p.add_argument("--events", metavar="FILE", help="write per-job events as JSON lines")
    p.add_argument("--plot", metavar="FILE.png", help="JCT CDF and GPUs-in-use plot (needs the `plot` extra)")
    p.add_argument("--reference-compat", action="store_true",
                   help="reproduce shared/data/reference: one GPU per job, Sia's calibration slowdowns and "
                        "its 1-GPU accumulation rule (docs/SIMULATOR.md)")
    p.set_defaults(func=cmd_sim)
    verbs = p.add_subparsers(dest="sim_verb", metavar="VERB")

    g = verbs.add_parser("generate", help="write a workload sampled from the Philly trace")
    g.add_argument("--trace", required=True, metavar="CSV", help="a Philly-format trace (shared/data/traces/philly.csv)")
    g.add_argument("--jobs", type=int, required=True, help="how many jobs the workload holds")
    g.add_argument("--hours", type=finite_float, required=True,
                   help="the length of the trace window they are sampled from (their arrival span)")
    g.add_argument("--seed", type=seed, default=0, help="which window and jobs (default 0)")
    g.add_argument("--out", metavar="FILE", help="output CSV (default: stdout)")
    g.set_defaults(func=cmd_generate)

    v = verbs.add_parser("validate", help="rigid-fifo against shared/data/reference (prints JSON)")
    v.add_argument("--data", required=True, metavar="DIR", help="the shared data directory (has reference/, profiles/)")
    v.add_argument("--cluster", dest="validate_cluster", metavar="FILE", help="cluster TOML (default: bundled)")
    v.set_defaults(func=cmd_validate)

    from heet_tui.cli.commands import sim_bound

    sim_bound.register_verb(verbs)


def load_inputs(cluster_path: str | None, profiles: str | None, one_gpu_accumulates: bool = False,
                 models: set[str] | None = None):
    from heet_tui.sim.cluster_spec import load_cluster
    from heet_tui.sim.errors import SimInputError
    from heet_tui.sim.physics import load_physics

    if not profiles:
        raise UsageError("sim: --profiles DIR is required (a Sia-format profile directory)")
    try:
        cluster = load_cluster(cluster_path or _bundled_cluster())
        physics = load_physics(profiles, cluster, models=models,
                               one_gpu_accumulates=one_gpu_accumulates)
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    return cluster, physics


def _hours(value: Any) -> str:
    return "-" if value is None else f"{value / 3600:.2f}"


def _print_table(summary: dict[str, Any], title: str) -> None:
    columns = ("policy", "avg JCT h", "p50 h", "p99 h", "makespan h", "GPU-h/job", "restarts/job", "util",
               "sched ms p50/p95", "done/unsched")
    rows = []
    for name, m in summary.items():
        std, per_file = m.get("std", {}), m.get("files", {})
        avg = _hours(m["avg_jct_s"])
        if len(per_file) > 1 and std.get("avg_jct_s") is not None:
            avg += f" ±{std['avg_jct_s'] / 3600:.2f}"
        fmt = lambda v, f="{:.2f}": "-" if v is None else f.format(v)  # noqa: E731
        # counts of jobs over every file (the JSON has the mean per file): a mean of 1/3 printed as "0"
        ended = [sum(f[key] or 0 for f in per_file.values()) if per_file else m[key] or 0
                 for key in ("jobs_done", "jobs_unschedulable")]
        rows.append((name, avg, _hours(m["p50_jct_s"]), _hours(m["p99_jct_s"]), _hours(m["makespan_s"]),
                     fmt(m["gpu_hours_per_job"]), fmt(m["restarts_per_job"]), fmt(m["utilization"], "{:.0%}"),
                     f"{fmt(m['sched_ms_p50'], '{:.1f}')}/{fmt(m['sched_ms_p95'], '{:.1f}')}",
                     f"{ended[0]:.0f}/{ended[1]:.0f}"))
    print_table(title, columns, rows)
    for name, m in summary.items():  # a file that finished no job has no JCT: the mean leaves it out
        per_file = m.get("files", {})
        without = sorted(f for f, v in per_file.items() if v.get("avg_jct_s") is None)
        if len(per_file) > 1 and without:
            kept = len(per_file) - len(without)
            print(f"note: {name}: " + (f"the JCT, makespan and utilization figures are the mean over {kept} of "
                                       f"{len(per_file)} files (GPU-h/job and restarts/job count every file); "
                                       if kept else "no file finished a job; ") + f"{', '.join(without)} finished no job")
    if len({r[-1] for r in rows}) > 1:  # a policy that left its slowest job unschedulable read as the fastest
        print(textwrap.fill("note: the policies finished different jobs (done/unsched): each JCT figure covers its "
                            "own policy's finished jobs only, so they do not compare as they stand; --events names "
                            "the jobs", width=max(40, min(120, shutil.get_terminal_size().columns))))


def _note_capped_batches(loaded: dict[Path, tuple[WorkloadJob, ...]], physics: Physics) -> None:
    """Say which jobs ask for a batch beyond their model's validation runs: the simulator trains
    them at the largest validated batch (the efficiency of a larger one is unknown), and a batch
    of 100,000 ran without a word, as if it were that job's real batch."""
    tops = {m: p.validation.max_batch_size for m, p in physics.models.items()}
    capped = [(path, job, tops[job.application]) for path, jobs in loaded.items() for job in jobs
              if job.application in tops and job.batch_size > tops[job.application]]
    if capped:
        path, job, top = capped[0]
        more = f" (and {len(capped) - 1} more)" if len(capped) > 1 else ""
        print(f"heet-tui sim: note: {path}:{job.line}: job {job.name} asks for batch {job.batch_size}, above the "
              f"largest validated batch of {job.application} ({top:g}): it trains at {top:g}{more}", file=sys.stderr)


def cmd_sim(args: argparse.Namespace) -> int:
    from heet_tui.sim.errors import PolicyError, SimInputError
    from heet_tui.sim.runner import RunSettings, compare
    from heet_tui.sim.workload import load_workload, workload_files

    if not args.workload:
        raise UsageError("sim: --workload FILE|DIR is required")
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    if not policies:
        raise UsageError("sim: --policy lists no policy")
    from heet_tui.scheduling.registry import make_policy

    for name in policies:
        try:
            make_policy(name)
        except ValueError as exc:
            raise UsageError(f"sim: {exc}") from None
    if not 1 <= args.interval <= 86_400:  # 0.001 s rounds ran a 7-job workload for minutes, unsaid
        raise UsageError(f"sim: --interval must be from 1 to 86400 seconds, got {args.interval:g}")
    outputs = {"--json": args.json, "--events": args.events, "--plot": args.plot}
    for option, path in outputs.items():
        check_output_path("sim", option, path)
    check_distinct("sim", outputs)
    if args.oracle and args.predictor is not None:
        raise UsageError("sim: --predictor chooses what policies are told without --oracle; give one of the two")
    if args.plot:
        try:
            from matplotlib.backend_bases import FigureCanvasBase
        except ImportError:
            raise UsageError("sim: --plot needs matplotlib, which is not installed: "
                             "pip install 'heet-tui[plot]' (the `plot` extra)") from None
        kinds = FigureCanvasBase.get_supported_filetypes()  # said after the whole run, it lost it
        suffix = Path(args.plot).suffix.lstrip(".").lower()
        if suffix and suffix not in kinds:
            raise UsageError(f"sim: --plot {args.plot}: matplotlib writes {', '.join(sorted(kinds))}, "
                             f"not .{suffix}")
    try:
        paths = workload_files(args.workload)
        loaded = {path: load_workload(path) for path in paths}
        models = {j.application for jobs in loaded.values() for j in jobs}
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    if args.cluster_scale < 1:
        raise UsageError("sim: --cluster-scale must be a positive integer")
    cluster, physics = load_inputs(args.cluster, args.profiles, args.reference_compat, models)
    try:
        cluster = cluster.scaled(args.cluster_scale)
    except ValueError as exc:
        raise UsageError(f"sim: --cluster-scale: {exc}") from None
    _note_capped_batches(loaded, physics)
    args.predictor = args.predictor or "model"
    settings = RunSettings(args.interval, args.oracle, args.seed, args.predictor, args.reference_compat)
    try:
        with contextlib.ExitStack() as stack:
            events = stack.enter_context(open(args.events, "w", encoding="utf-8")) if args.events else None
            summary, results = compare(cluster, physics, paths, policies, settings, events=events,
                                       loaded={str(p): jobs for p, jobs in loaded.items()})
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    except PolicyError as exc:
        raise CliError(str(exc)) from None
    except BrokenPipeError:  # --events /dev/stdout | head: the reader has what it wanted
        return 0
    except OSError as exc:
        raise CliError(f"sim: {f'--events {args.events}: ' if args.events else ''}{exc.strerror or exc}") from None
    except KeyboardInterrupt:
        kept = f"; {args.events} holds the events up to the interruption" if args.events else ""
        # a --json file there already is an earlier run's: a script reading it after the interrupt
        # took another workload's figures for this run's
        older = (f"; {args.json} is left as it was, an earlier run's results" if args.json and Path(args.json).exists()
                 else "")
        print(f"heet-tui sim: interrupted: no results written{kept}{older}", file=sys.stderr)
        return 130
    mode = "oracle" if args.oracle else f"predicted throughput ({args.predictor})"
    _print_table(summary, f"{cluster.name} ({cluster.total_gpus} GPUs), {len(paths)} workload file(s), {mode}")
    try:  # checked up front, so only a disk filling up or a path removed meanwhile fails here
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"sim: --json {args.json}: {exc.strerror or exc}") from None
    if args.plot:
        from heet_tui.sim.plot import write_plot

        try:
            write_plot(results, args.plot, cluster.total_gpus)
        except OSError as exc:
            raise CliError(f"sim: --plot {args.plot}: {exc.strerror or exc}") from None
        print(f"heet-tui sim: wrote {args.plot} (JCT CDF and GPUs in use)", file=sys.stderr)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from heet_tui.sim.errors import SimInputError
    from heet_tui.sim.generate import generate, read_trace, write_workload

    check_output_path("sim generate", "--out", args.out)
    try:
        jobs = generate(read_trace(args.trace), args.jobs, args.hours, args.seed)
        text = write_workload(jobs, args.out)
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"sim generate: {exc}") from None
    if not args.out:
        sys.stdout.write(text)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from heet_tui.sim.errors import SimInputError
    from heet_tui.sim.validate import validate_against_reference

    try:
        report = validate_against_reference(Path(args.data), args.validate_cluster or _bundled_cluster())
    except SimInputError as exc:
        raise UsageError(str(exc)) from None
    print(json.dumps(report, indent=2))
    off = sorted(name for name, entry in report.items() if isinstance(entry, dict)
                 and not entry.get("reference_compat", {}).get("within_10pct", True))
    if off:  # a script checking the exit code took a ratio of 2.8 for a pass
        print(f"sim validate: {', '.join(off)}: the reference-compatible average JCT is not within 10% of the "
              "reference (run it on the reference's own cluster: no --cluster)", file=sys.stderr)
        return 1
    return 0
