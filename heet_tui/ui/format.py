"""Human-readable numbers for the tables: durations, rates, ages. Pure functions, no Textual."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection

from heet_tui.core.durations import duration


def clock(now: float, mode: str) -> str:
    """The snapshot's time as a person reads it: simulated time since start in the demo, else wall clock."""
    if mode == "demo":
        return f"t={duration(now)}"
    return time.strftime("%H:%M:%S", time.localtime(now))


def rate(samples_per_s: float | None) -> str:
    if samples_per_s is None or samples_per_s <= 0:
        return "-"
    if samples_per_s >= 10_000:
        return f"{samples_per_s / 1000:.0f}k/s"
    if samples_per_s >= 100:
        return f"{samples_per_s:.0f}/s"
    return f"{samples_per_s:.1f}/s"


def signed_percent(before: float, after: float) -> str:
    """Throughput change as a percentage; a start from zero is shown as ``new``."""
    if before <= 0 and after <= 0:
        return "-"
    if before <= 0:
        return "new"
    change = (after - before) / before * 100
    return f"{change:+.0f}%"


def progress_bar(fraction: float, width: int = 10) -> str:
    """A text bar (``█████░░░░░ 50%``): cheap to render in a table cell for thousands of rows."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(round(fraction * width))
    return "█" * filled + "░" * (width - filled) + f" {fraction * 100:3.0f}%"


_PALETTE = (
    "#e06c75", "#98c379", "#e5c07b", "#61afef", "#c678dd", "#56b6c2", "#d19a66", "#be5046",
    "#7ec699", "#f0a6ca", "#9aa5ce", "#ffd866", "#78dce8", "#ab9df2", "#fc9867", "#a9dc76",
)


def job_colour(job_id: str) -> str:
    """A stable colour per job, so the same job looks the same on every screen and every run."""
    digest = hashlib.blake2s(job_id.encode(), digest_size=2).digest()
    return _PALETTE[int.from_bytes(digest, "big") % len(_PALETTE)]


JOB_SHAPES = "■▲●◆▼◀▶"  # a GPU cell's shape: jobs told apart without colour (NO_COLOR, colour blindness)


def job_shape(job_id: str, taken: Collection[str] = ()) -> str:
    """A stable shape per job, independent of its colour (two jobs of one colour mostly differ
    in shape), the next one free where another job on the same host has it already."""
    digest = hashlib.blake2s(job_id.encode(), digest_size=2).digest()
    first = int.from_bytes(digest, "big") // len(_PALETTE) % len(JOB_SHAPES)
    for i in range(len(JOB_SHAPES)):
        shape = JOB_SHAPES[(first + i) % len(JOB_SHAPES)]
        if shape not in taken:
            return shape
    return JOB_SHAPES[first]


ID_WIDTH = 24


def short_id(job_id: str, width: int = ID_WIDTH) -> str:
    """A long id cut in the middle: a sweep's ids differ at their ends (the seed, the "-2"), and a
    40-character id pushed every other column off an 80-column screen. The details show it whole."""
    if len(job_id) <= width:
        return job_id
    head = (width - 1) * 2 // 5  # more of the end, where twins differ
    return job_id[:head] + "…" + job_id[-(width - 1 - head):]
