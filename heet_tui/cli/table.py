"""Plain aligned columns for command output (no colour: it goes to pipes and logs as often as to
a terminal)."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row's cells padded to their column's widest, two spaces apart, trailing spaces cut."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
