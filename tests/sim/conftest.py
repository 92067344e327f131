"""Fixtures for the simulator tests: a Sia-format profile directory built from shipped subsets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from heet_tui.sim.cluster_spec import SimCluster
from heet_tui.sim.physics import Physics, load_physics

TESTS = Path(__file__).resolve().parent.parent
PLACEMENTS = TESTS / "data" / "profiles"
VALIDATION = Path(__file__).resolve().parent / "data" / "validation"
WORKLOADS = TESTS / "data" / "workloads"
NODE_TYPES = {"aws": ("T4", 4), "rtx": ("RTX2080Ti", 8), "dgx-ext": ("A100", 8)}


@pytest.fixture(scope="session")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profiles")
    for model in ("cifar10", "imagenet"):
        shutil.copytree(PLACEMENTS / model, root / model)
        for f in (VALIDATION / model).glob("validation-*.csv"):
            shutil.copy(f, root / model / f.name)
    return root


def cluster_of(*types: tuple[str, int]) -> SimCluster:
    """A cluster of (Sia node type, node count) pairs, e.g. ``cluster_of(("aws", 2))``."""
    return SimCluster.of("test", *((n, NODE_TYPES[n][0], NODE_TYPES[n][1], c) for n, c in types))


@pytest.fixture(scope="session")
def physics(profile_dir: Path) -> Physics:
    return load_physics(profile_dir, {n: t for n, (t, _) in NODE_TYPES.items()})
