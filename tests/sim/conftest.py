"""Fixtures for the simulator tests: a Sia-format profile directory built from the shipped subset."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sim_support import NODE_TYPES, SHIPPED

from heet_tui.sim.physics import Physics, load_physics


@pytest.fixture(scope="session")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profiles")
    for model in ("cifar10", "imagenet"):
        shutil.copytree(SHIPPED / model, root / model)
    return root


@pytest.fixture(scope="session")
def physics(profile_dir: Path) -> Physics:
    return load_physics(profile_dir, {n: t for n, (t, _) in NODE_TYPES.items()})
