"""Per-model constants the profile files do not contain: target epochs and restart seconds.

Source: the table in ``shared/README.md`` ("data/profiles"), which reports the values the Sia
artifact (SOSP 2023, siasosp23/artifacts, sia-simulator/applications.py) uses: the epoch count
each model trains for and the measured checkpoint-restore (restart) cost in seconds.
Models not listed fall back to the last profiled epoch and ``DEFAULT_RESTART_S``.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_RESTART_S = 30.0


@dataclass(frozen=True, slots=True)
class ModelConstants:
    target_epochs: int | None
    restart_s: float


MODEL_CONSTANTS: dict[str, ModelConstants] = {
    "cifar10": ModelConstants(100, 50.0),
    "imagenet": ModelConstants(90, 250.0),
    "bert": ModelConstants(2, 120.0),
    "deepspeech2": ModelConstants(80, 25.0),
    "yolov3": ModelConstants(50, 80.0),
    "ncf": ModelConstants(10, 15.0),
}


def constants_for(model: str) -> ModelConstants:
    return MODEL_CONSTANTS.get(model, ModelConstants(None, DEFAULT_RESTART_S))


# Sia's calibration: "slowdown values for each job fitted to real-world data" (real runs were
# this much slower than the profiles predict). Source: siasosp23/artifacts,
# sia-simulator/simulator_config.py (SLOWDOWNS). The published reference results include them;
# the simulator applies them only when asked (``--reference-compat``).
SIA_SLOWDOWNS: dict[str, float] = {
    "cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2, "ncf": 1.5, "gpt_pmp": 1.0,
}
