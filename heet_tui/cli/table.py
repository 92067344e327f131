"""Plain aligned columns for command output (no colour: it goes to pipes and logs as often as to
a terminal)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence


def line_room(used: int, least: int) -> int | None:
    """Columns left on a line after ``used`` (at least ``least``); None, no limit, when output goes
    to a pipe or a file without COLUMNS set: grep and logs want messages whole, not cut at 120."""
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return None
    return max(least, shutil.get_terminal_size((120, 24)).columns - used)


def first_line(text: str, width: int | None) -> str:
    """``text``'s first line in ``width`` characters (None: whole), "…" saying there is more."""
    line = text.split("\n", 1)[0]
    more = line != text
    if width is None or len(line) + 2 * more <= width:
        return line + (" …" if more else "")
    return line[:width - 1] + "…"


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row's cells padded to their column's widest, two spaces apart, trailing spaces cut."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
