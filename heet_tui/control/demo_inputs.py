"""What the demo runs: the profile data it finds, and its small workload, unless the user gives
a cluster and a workload of their own (``heet-tui --demo --demo-cluster FILE --demo-workload FILE``)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from heet_tui.config.hosts_file import bundled_config
from heet_tui.sim import SimCluster, WorkloadJob, load_cluster, load_workload
from heet_tui.sim.generate import CONFIGS

REPO = Path(__file__).resolve().parents[2]
DEMO_MODELS = ("cifar10", "bert", "deepspeech2", "yolov3", "imagenet")


def find_profiles() -> Path:
    """Where the demo reads job physics from; raises ``ValueError`` saying how to provide it."""
    candidates = []
    if os.environ.get("HEET_PROFILES"):
        candidates.append(Path(os.environ["HEET_PROFILES"]).expanduser())
    shared = Path(os.environ.get("HEET_SHARED") or REPO.parent / "shared")
    candidates.append(shared / "data" / "profiles")
    candidates.append(Path(str(resources.files("heet_tui"))) / "data" / "profiles")
    for path in candidates:
        if path.is_dir() and any(path.glob("*/placements-*.csv")):
            return path
    raise ValueError("no profile data for the demo: set HEET_PROFILES to a Sia-format profile directory "
                     f"(looked in {', '.join(str(c) for c in candidates)})")


def demo_workload(models: tuple[str, ...], jobs: int = 10, gap_s: float = 180.0) -> tuple[WorkloadJob, ...]:
    """A small workload in the shared workloads' style: their (GPU count, batch size) per model.

    Mostly the quick models, so a newcomer watches jobs finish within minutes; deterministic.
    """
    usable = [m for m in DEMO_MODELS if m in models and m in CONFIGS] or list(models)
    if not usable:
        raise ValueError("the profile directory has no model the demo knows")
    weights = {"cifar10": 4, "bert": 2, "deepspeech2": 2, "yolov3": 1, "imagenet": 1}
    cycle = [m for m in usable for _ in range(weights.get(m, 1))]
    out = []
    for i in range(jobs):
        model = cycle[i % len(cycle)]
        replicas, batch = CONFIGS.get(model, ((1, 128),))[i % len(CONFIGS.get(model, ((1, 128),)))]
        out.append(WorkloadJob(f"{model}-{i + 1}", i * gap_s, model, replicas, batch, line=i + 1))
    return tuple(out)


def demo_inputs(profiles: Path, jobs: int, cluster: Path | None = None, workload: Path | None = None
                ) -> tuple[SimCluster, tuple[WorkloadJob, ...], str]:
    """The cluster, the workload and its label the demo runs: the reference ones, or the user's own
    files, read and checked here (``ValueError`` naming the file and line: ``SimInputError``, or a
    model with no profile)."""
    sim_cluster = load_cluster(cluster or bundled_config("sim/sia-64gpu.toml"))
    available = tuple(sorted(p.name for p in profiles.iterdir() if any(p.glob("placements-*.csv"))))
    loaded = load_workload(workload) if workload is not None else demo_workload(available, jobs)
    if unknown := next((w for w in loaded if w.application not in available), None):
        raise ValueError(f"{workload}:{unknown.line}: application {unknown.application!r} has no profile in "
                         f"{profiles} (there: {', '.join(available)})")
    return sim_cluster, loaded, workload.name if workload is not None else "demo workload"


def check_demo_files(cluster: Path | None, workload: Path | None) -> None:
    """``demo_inputs`` of the user's files, before the TUI starts: raises ``ValueError`` saying what is wrong."""
    demo_inputs(find_profiles(), 10, cluster, workload)
