"""What a training script reports besides its progress: loss, accuracy, learning rate, ...

Progress lines carry step, samples and speed for the scheduler; the rest of their numbers are
what the person watching a sweep asks about ("which learning rate is winning?"). The latest
value of each is kept per job (``merged``) and shown as reported, never interpreted.
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


def merged(kept: Metrics, newer: Metrics) -> Metrics:
    """``kept`` with each metric of ``newer`` at its newer value: a validation metric printed every
    N steps vanished at the next line that carried only the loss. Names keep their first place
    (``loss`` first, new ones after), so a Jobs column does not jump; at most MAX_METRICS, all of
    ``newer``'s (one line holds no more) and as many of the others as fit, in their order."""
    if not newer:
        return kept
    latest = dict(newer)
    others = [name for name, _ in kept if name not in latest][:max(0, MAX_METRICS - len(latest))]
    keep, values = {*latest, *others}, dict(kept) | latest
    order = [name for name in dict.fromkeys([*(name for name, _ in kept), *latest]) if name in keep]
    order.sort(key=lambda name: name != "loss")
    return tuple((name, values[name]) for name in order)


def metric(metrics: Metrics, name: str) -> float | None:
    return next((value for key, value in metrics if key == name), None)


def number(value: float | None) -> str:
    """Four significant digits: a loss of 0.000123 and one of 1234.5 both read at a glance."""
    return "-" if value is None else f"{value:.4g}"


def describe(metrics: Metrics) -> str:
    return "  ".join(f"{key} {number(value)}" for key, value in metrics)
