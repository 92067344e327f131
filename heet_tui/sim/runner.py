"""Run several policies over one workload file or a directory of them, with a progress bar.

This is the batch face of the simulator (``heet-tui sim``); the steppable face is
:class:`heet_tui.sim.engine.Simulation`. A progress bar (rich) is drawn only on a terminal, so
piped output and CI logs stay clean.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.engine import JobRecord, RoundStats, Simulation
from heet_tui.sim.metrics import aggregate, summarize
from heet_tui.sim.model_table import SIA_SLOWDOWNS
from heet_tui.sim.physics import Physics
from heet_tui.sim.workload import WorkloadJob, load_workload

PolicyFactory = Callable[[str], object]


@dataclass(frozen=True, slots=True)
class RunSettings:
    interval: float = 60.0
    oracle: bool = False
    seed: int = 0
    predictor: str = "model"  # "model": heet_tui.profiling's completion model; "simple": power law
    # Reproduce data/reference: one GPU per job, Sia's calibration slowdowns and its 1-GPU
    # accumulation rule (the physics must be loaded with one_gpu_accumulates as well).
    reference_compat: bool = False


@dataclass
class RunResult:
    policy: str
    workload: str
    summary: dict[str, float | int | None]
    records: list[JobRecord]
    stats: RoundStats


def default_factory(name: str) -> object:
    from heet_tui.scheduling.registry import make_policy

    return make_policy(name)


def prepare_jobs(jobs: Sequence[WorkloadJob], settings: RunSettings) -> tuple[WorkloadJob, ...]:
    if not settings.reference_compat:
        return tuple(jobs)
    return tuple(dataclasses.replace(j, num_replicas=1, min_gpus=1, max_gpus=1) for j in jobs)


# within one time, what frees GPUs comes before what takes them: written as the plan listed its
# jobs, a migrate onto GPUs came before the shrink that freed them, and a replay over-filled a type
RELEASES_FIRST = {"submit": 0, "done": 1, "unschedulable": 1, "cancelled": 1, "preempt": 2, "shrink": 3,
                  "migrate": 4, "grow": 5, "start": 6}


def simulate(cluster: SimCluster, physics: Physics, jobs: Sequence[WorkloadJob], policy: object,
             settings: RunSettings, *, label: str = "", events: IO[str] | None = None,
             on_round: Callable[[Simulation], None] | None = None, policy_name: str = "") -> RunResult:
    held: list[dict] = []  # a round's events, written in time order at its end: a job done mid-round
    # came before an arrival stamped earlier, and a replay in file order over-filled the GPUs

    def sink(event: dict) -> None:
        held.append(event)

    def flush() -> None:
        if events is not None:
            for event in sorted(held, key=lambda e: (e["t"], RELEASES_FIRST.get(e["event"], 9))):
                events.write(json.dumps({"policy": policy_name, "workload": label, **event}) + "\n")
        held.clear()

    def each_round(sim: Simulation) -> None:
        flush()
        if on_round is not None:
            on_round(sim)

    sim = Simulation(cluster, prepare_jobs(jobs, settings), physics, policy, interval=settings.interval,
                     oracle=settings.oracle, seed=settings.seed, events=sink if events is not None else None,
                     slowdowns=SIA_SLOWDOWNS if settings.reference_compat else None, source_label=label,
                     predictor=settings.predictor)
    try:
        records = sim.run(each_round)
    finally:
        flush()  # an interrupted run keeps what it had
    return RunResult(policy_name, label, summarize(records, sim.stats, cluster.total_gpus), records, sim.stats)


class _Progress:
    """A rich progress bar on a TTY, nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self._bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), transient=True)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def task(self, description: str, total: int) -> Callable[[Simulation], None] | None:
        bar = self._bar
        if bar is None:
            return None
        task_id = bar.add_task(description, total=total)

        def update(sim: Simulation) -> None:
            bar.update(task_id, completed=sim.jobs_ended)

        return update


def workload_labels(files: Sequence[Path | str]) -> dict[str, str]:
    """A unique, short label per workload file: its name, or as many parent folders as it takes.

    Results are keyed by these labels, so ``saturn/workload-1.csv`` and ``philly/workload-1.csv``
    must not both become ``workload-1.csv`` (one would silently overwrite the other).
    """
    paths = [str(f) for f in files]
    parts = {p: Path(p).parts for p in paths}
    depth = {p: 1 for p in paths}
    while True:
        labels = {p: "/".join(parts[p][-depth[p]:]) for p in paths}
        clash = [p for p in paths if sum(1 for q in paths if labels[q] == labels[p]) > 1
                 and depth[p] < len(parts[p])]
        if not clash:
            return labels
        for p in clash:
            depth[p] += 1


def compare(cluster: SimCluster, physics: Physics, files: Sequence[Path], policies: Sequence[str],
            settings: RunSettings, *, events: IO[str] | None = None, progress: bool | None = None,
            factory: PolicyFactory = default_factory,
            loaded: dict[str, list[WorkloadJob]] | None = None) -> tuple[dict[str, object], list[RunResult]]:
    """Every policy on every file; returns the JSON-ready summary and the raw results. ``loaded``:
    the files as the caller read them (a pipe, --workload <(...), reads once: the second read was
    empty)."""
    show = sys.stderr.isatty() if progress is None else progress
    workloads = {str(f): (loaded or {}).get(str(f)) or load_workload(f) for f in files}
    labels = workload_labels(list(workloads))
    results: list[RunResult] = []
    summary: dict[str, object] = {}
    with _Progress(show) as bar:
        for name in policies:
            per_file: dict[str, dict[str, float | int | None]] = {}
            for path, jobs in workloads.items():
                on_round = bar.task(f"{name} {labels[path]}", len(jobs))
                result = simulate(cluster, physics, jobs, factory(name), settings, label=path, events=events,
                                  on_round=on_round, policy_name=name)
                results.append(result)
                per_file[labels[path]] = result.summary
            entry = aggregate(per_file)
            entry["run"] = {"cluster": cluster.source or cluster.name, "gpus": cluster.total_gpus,
                            "interval_s": settings.interval,
                            "oracle": settings.oracle, "seed": settings.seed,
                            "predictor": None if settings.oracle else settings.predictor,
                            "reference_compat": settings.reference_compat}
            summary[name] = entry
    return summary, results
