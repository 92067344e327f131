"""The simulator's per-file results must not collide when two workloads share a file name.

Lives with the scheduling tests because it guards the figures the Heet policy is judged by
(saturn/workload-1.csv against philly/workload-1.csv); it runs the real ``compare``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.physics import load_physics
from heet_tui.sim.runner import RunSettings, compare, workload_labels

TESTS = Path(__file__).resolve().parent.parent
SHIPPED = TESTS.parent / "heet_tui" / "data" / "profiles"
HEAD = TESTS / "data" / "workloads" / "saturn-head.csv"


def test_labels_are_names_when_unique_and_parents_when_not() -> None:
    labels = workload_labels(["w/saturn/workload-1.csv", "w/philly/workload-1.csv", "w/philly/workload-2.csv"])
    assert labels == {"w/saturn/workload-1.csv": "saturn/workload-1.csv",
                      "w/philly/workload-1.csv": "philly/workload-1.csv",
                      "w/philly/workload-2.csv": "workload-2.csv"}
    assert workload_labels(["a.csv", "b.csv"]) == {"a.csv": "a.csv", "b.csv": "b.csv"}
    deep = workload_labels(["x/a/w.csv", "y/a/w.csv"])
    assert deep == {"x/a/w.csv": "x/a/w.csv", "y/a/w.csv": "y/a/w.csv"}


def test_compare_keeps_both_files_of_the_same_name(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    shutil.copytree(SHIPPED / "cifar10", profiles / "cifar10")
    rows = HEAD.read_text().splitlines()
    cifar = [r for r in rows[1:] if ",cifar10," in r]
    files = []
    for name, body in (("saturn", cifar[:2]), ("philly", cifar[2:5])):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "workload-1.csv"
        path.write_text("\n".join([rows[0], *body]) + "\n")
        files.append(path)
    cluster = SimCluster.of("test", ("dgx-ext", "A100", 8, 1))
    physics = load_physics(profiles, {"dgx-ext": "A100"}, models={"cifar10"})
    summary, _ = compare(cluster, physics, files, ["fifo"], RunSettings(oracle=True), progress=False)
    per_file = summary["fifo"]["files"]
    assert set(per_file) == {"saturn/workload-1.csv", "philly/workload-1.csv"}
    assert per_file["saturn/workload-1.csv"]["jobs"] == 2
    assert per_file["philly/workload-1.csv"]["jobs"] == 3
