"""Statistical-efficiency data: the ``validation-<batch>.csv`` files of a Sia-format profile.

Each file follows one real training run at one global batch size, one row per epoch:
``progress`` (cumulative statistical progress, in iterations at the smallest validated batch
size), ``iteration``, ``metric``, and the gradient statistics ``grad_sqr`` and ``grad_var``
that the Pollux (OSDI 2021) gradient-noise-scale model turns into a batch-size efficiency.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from heet_tui.sim.csv_rows import read_rows
from heet_tui.sim.errors import SimInputError


@dataclass(frozen=True, slots=True)
class ValidationRun:
    batch_size: int
    progress: tuple[float, ...]
    grad_sqr: tuple[float, ...]
    grad_var: tuple[float, ...]


@dataclass(frozen=True)
class ValidationTable:
    """All validated batch sizes of one model, smallest first."""

    model: str
    runs: tuple[ValidationRun, ...]

    def __post_init__(self) -> None:
        # Policies ask for the same (batch, epoch) thousands of times per round.
        object.__setattr__(self, "gain", lru_cache(maxsize=65536)(self._gain))
        object.__setattr__(self, "progress_at", lru_cache(maxsize=4096)(self._progress_at))

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(r.batch_size for r in self.runs)

    @property
    def init_batch_size(self) -> int:
        """Progress is counted in iterations at this batch size (gain 1)."""
        return self.runs[0].batch_size

    @property
    def max_batch_size(self) -> int:
        return self.runs[-1].batch_size

    @property
    def epochs(self) -> int:
        """Epochs every run covers (the shortest run bounds what can be simulated)."""
        return min(len(r.progress) for r in self.runs)

    def _progress_at(self, epoch: int) -> float:
        """Progress needed to finish ``epoch`` epochs (the minimum over runs, as the Sia simulator)."""
        if epoch <= 0:
            return 0.0
        return min(r.progress[epoch - 1] for r in self.runs)

    def grad_stats(self, batch_size: float, epoch: int) -> tuple[float, float]:
        """``(grad_sqr, grad_var)`` during ``epoch``, interpolated linearly in batch size.

        Batch sizes outside the validated range are clamped to it: the gradient noise scale
        beyond the measured runs is unknown, and clamping keeps the efficiency bounded.
        """
        sizes = self.batch_sizes
        b = min(max(batch_size, sizes[0]), sizes[-1])
        e = min(max(epoch, 0), self.epochs - 1)
        i = bisect.bisect_left(sizes, b)
        if sizes[min(i, len(sizes) - 1)] == b:
            r = self.runs[min(i, len(sizes) - 1)]
            return r.grad_sqr[e], r.grad_var[e]
        lo, hi = self.runs[i - 1], self.runs[i]
        w = (b - lo.batch_size) / (hi.batch_size - lo.batch_size)
        return (lo.grad_sqr[e] + w * (hi.grad_sqr[e] - lo.grad_sqr[e]),
                lo.grad_var[e] + w * (hi.grad_var[e] - lo.grad_var[e]))

    def _gain(self, batch_size: float, epoch: int) -> float:
        """Statistical progress per iteration at ``batch_size`` relative to the initial batch.

        Pollux's gradient-noise-scale gain: with scale ``s = B / B0``,
        ``gain = (var + sqr) / (var / s + sqr)``; 1 at ``B0``, approaching ``s`` when noise dominates.
        """
        sqr, var = self.grad_stats(batch_size, epoch)
        scale = batch_size / self.init_batch_size
        denom = var / scale + sqr
        if denom <= 0:
            return 1.0
        return (var + sqr) / denom


def _read_run(path: Path, label: str, batch_size: int) -> ValidationRun:
    columns = ("progress", "grad_sqr", "grad_var")
    cols: dict[str, list[float]] = {c: [] for c in columns}
    lines: list[int] = []
    for lineno, row in read_rows(path, label, columns):
        lines.append(lineno)
        for c in columns:
            try:
                value = float(row[c])
            except ValueError:
                raise SimInputError(f'{label}:{lineno}: column "{c}": not a number: "{row[c]}"') from None
            if not math.isfinite(value) or value < 0:
                raise SimInputError(f'{label}:{lineno}: column "{c}": must be a non-negative number')
            cols[c].append(value)
    if not cols["progress"]:
        raise SimInputError(f"{label}:2: no data rows")
    prog = cols["progress"]
    if back := next((i for i in range(1, len(prog)) if prog[i] < prog[i - 1]), None):
        raise SimInputError(f'{label}:{lines[back]}: column "progress": {prog[back]:g} after {prog[back - 1]:g}: '
                            "it must not decrease from one epoch to the next")
    if prog[-1] <= 0:  # a job of this model "finished" after its restart pause (JCT 0.02 h)
        raise SimInputError(f'{label}:{lines[-1]}: column "progress": no progress by the last epoch')
    return ValidationRun(batch_size, tuple(prog), tuple(cols["grad_sqr"]), tuple(cols["grad_var"]))


def read_validation(folder: Path, label_prefix: str = "") -> ValidationTable | None:
    """The model's validation table, or ``None`` when the folder has no validation files."""
    runs = []
    for path in folder.glob("validation-*.csv"):
        suffix = path.stem[len("validation-"):]
        label = f"{label_prefix}{path.name}"
        if not suffix.isdigit() or int(suffix) <= 0:
            raise SimInputError(f"{label}: file name must be validation-<global batch size>.csv")
        runs.append(_read_run(path, label, int(suffix)))
    if not runs:
        return None
    runs.sort(key=lambda r: r.batch_size)
    return ValidationTable(folder.name, tuple(runs))
