"""Durations as people read them, for every layer that talks to a person (the UI, the CLI, and
the controller's messages, which must not import the UI)."""

from __future__ import annotations


def duration(seconds: float | None) -> str:
    """``None`` (unknown) is a dash; otherwise the two largest units, e.g. ``1h05m`` or ``42s``."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
