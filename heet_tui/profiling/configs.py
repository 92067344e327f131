"""Configurations (placements) as the profiling model sees them: keys, parsing and side features.

A configuration is a placement, GPUs per host largest first, written with
:func:`heet_tui.core.allocation.placement_key` (``(2, 2) -> "22"``). The completion model does not
treat configurations as unrelated labels: real throughput rises sub-linearly with the GPU count
and drops when a job spans hosts, so each configuration carries a few numeric features that let
the model share what it learns between, say, ``44`` and ``444``.
"""

from __future__ import annotations

import math

import numpy as np

from heet_tui.core.allocation import placement_key

Placement = tuple[int, ...]

# Names of the columns :func:`config_features` returns, for documentation and debugging.
FEATURE_NAMES = ("log_gpus", "log_gpus_sq", "multi_host", "log_hosts", "imbalance")


def parse_key(key: str) -> Placement:
    """Inverse of ``placement_key``: ``"42" -> (4, 2)``, ``"12-10" -> (12, 10)``."""
    text = key.strip()
    parts = text.split("-") if "-" in text else list(text)
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"not a placement key: {key!r}")
    return tuple(sorted((int(p) for p in parts), reverse=True))


def normalise(placement: Placement | str) -> Placement:
    if isinstance(placement, str):
        return parse_key(placement)
    out = tuple(sorted((int(c) for c in placement if int(c) > 0), reverse=True))
    if not out:
        raise ValueError(f"empty placement: {placement!r}")
    return out


def key_of(placement: Placement | str) -> str:
    return placement_key(normalise(placement))


def config_features(placements: list[Placement]) -> np.ndarray:
    """Side features per configuration, one row each (columns: :data:`FEATURE_NAMES`).

    ``log_gpus`` carries sub-linear scaling (a slope below 1 in log space), ``log_gpus_sq`` its
    bend, ``multi_host`` and ``log_hosts`` the price of crossing the network, and ``imbalance``
    the straggler effect of uneven spreads such as ``41``.
    """
    rows = []
    for p in placements:
        k = sum(p)
        hosts = len(p)
        lk = math.log(k)
        imbalance = (max(p) - min(p)) / max(p) if hosts > 1 else 0.0
        rows.append((lk, lk * lk / 4.0, 1.0 if hosts > 1 else 0.0, math.log(hosts), imbalance))
    return np.asarray(rows, dtype=float).reshape(len(placements), len(FEATURE_NAMES))


# How throughput typically scales before anything says otherwise: ~k^0.85 for k data-parallel GPUs
# at a fixed global batch, and 0.85x when a job spans hosts. The controller's rule for cells the
# model cannot predict yet (heet_tui.control.throughput) and the model's own starting point for a
# job when no job is well observed (predictor.cold_start_mean) both use it.
TYPICAL_SCALING_EXPONENT = 0.85
TYPICAL_MULTI_HOST_FACTOR = 0.85

