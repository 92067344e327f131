"""What a training script reports besides its progress: loss, accuracy, learning rate, ...

Progress lines carry step, samples and speed for the scheduler; the rest of their numbers are
what the person watching a sweep asks about ("which learning rate is winning?"). The latest
values are kept per job and shown as reported, never interpreted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

Metrics = tuple[tuple[str, float], ...]

# what the scheduler reads (docs/TRAINING.md, Progress lines): not a metric of the training
BOOKKEEPING = frozenset({"step", "samples", "samples_per_s", "checkpoint", "checkpoint_s", "world_size"})
MAX_METRICS = 8  # a script that prints a whole dict of statistics cannot grow every snapshot
MAX_NAME = 32


def training_metrics(progress: Mapping[str, Any]) -> Metrics:
    """The finite numbers of a progress line that are not bookkeeping, ``loss`` first and the
    rest in the order printed."""
    found = [(key, float(value)) for key, value in progress.items()
             if isinstance(key, str) and key not in BOOKKEEPING and 0 < len(key) <= MAX_NAME
             and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)]
    found.sort(key=lambda item: item[0] != "loss")
    return tuple(found[:MAX_METRICS])


def metric(metrics: Metrics, name: str) -> float | None:
    return next((value for key, value in metrics if key == name), None)


def number(value: float | None) -> str:
    """Four significant digits: a loss of 0.000123 and one of 1234.5 both read at a glance."""
    return "-" if value is None else f"{value:.4g}"


def describe(metrics: Metrics) -> str:
    return "  ".join(f"{key} {number(value)}" for key, value in metrics)
