"""Helpers for the simulator tests (a module of its own: ``conftest`` is not importable by name
when several test folders each have one)."""

from __future__ import annotations

from pathlib import Path

from heet_tui.sim.cluster_spec import SimCluster

TESTS = Path(__file__).resolve().parent.parent
SHIPPED = TESTS.parent / "heet_tui" / "data" / "profiles"  # placements, scalability and validation subset
WORKLOADS = TESTS / "data" / "workloads"
NODE_TYPES = {"aws": ("T4", 4), "rtx": ("RTX2080Ti", 8), "dgx-ext": ("A100", 8)}


def cluster_of(*types: tuple[str, int]) -> SimCluster:
    """A cluster of (Sia node type, node count) pairs, e.g. ``cluster_of(("aws", 2))``."""
    return SimCluster.of("test", *((n, NODE_TYPES[n][0], NODE_TYPES[n][1], c) for n, c in types))
