"""The scaling rule a job's estimates fall back on where nothing measured a placement: its nearest
measured count scaled by a power law in GPU count (the job's own exponent where it ran at two
counts, else the typical one), with a penalty for crossing hosts."""

from __future__ import annotations

import math
from collections import defaultdict

from heet_tui.profiling.configs import TYPICAL_MULTI_HOST_FACTOR, TYPICAL_SCALING_EXPONENT

MIN_OWN_EXPONENT = -3.0  # 2x the GPUs at 1/8 the speed: as bad as a job's own measurements need to say


def parse_placement(key: str) -> tuple[int, ...]:
    parts = key.split("-") if "-" in key else list(key)
    return tuple(sorted((int(p) for p in parts), reverse=True))


def own_scaling_exponent(measured: dict[tuple[str, str], float],
                         otherwise: float = TYPICAL_SCALING_EXPONENT) -> float:
    """How this job's speed grows with GPUs where it ran at two or more counts on one host of a
    type (mean over such pairs, each against the type's smallest count), else the typical law.

    A job's scaling carries over between types far better than the typical law does: a small
    model that ran 10x slower on 2 A100s than on 1 (its step all communication) was moved to 4 T4s
    predicted at 3.4x one T4, then to 2, then to 1, three restarts on an idle cluster. Clamped:
    more than linear is noise, and a steep fall is only ever used to stay away.
    """
    by_type: dict[str, dict[int, float]] = defaultdict(dict)
    for (gpu_type, key), value in measured.items():
        placement = parse_placement(key)
        if len(placement) == 1:
            by_type[gpu_type][placement[0]] = value
    exponents = []
    for counts in by_type.values():
        low = min(counts)
        exponents += [math.log(v / counts[low]) / math.log(c / low) for c, v in counts.items() if c != low]
    if not exponents:
        return otherwise
    return min(1.0, max(MIN_OWN_EXPONENT, sum(exponents) / len(exponents)))


def scaled(measured: dict[tuple[int, ...], float], placement: tuple[int, ...],
            exponent: float = TYPICAL_SCALING_EXPONENT) -> float:
    count = sum(placement)
    ref = min(measured, key=lambda p: (abs(math.log(sum(p) / count)), len(p)))
    value = measured[ref] * (count / sum(ref)) ** exponent
    if len(placement) > 1 and len(ref) == 1:
        value *= TYPICAL_MULTI_HOST_FACTOR
    elif len(placement) == 1 and len(ref) > 1:
        value /= TYPICAL_MULTI_HOST_FACTOR
    return value
