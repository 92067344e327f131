"""Names ordered as people number them: sweep-2 before sweep-10, rack1-h9 before rack1-h10."""

from __future__ import annotations

import re

_PARTS = re.compile(r"(\d+\.\d+|\d+)")


def natural_key(name: str) -> tuple[tuple[int, float | str], ...]:
    """Numbers compare by value and the rest as text (a sweep of 40 jobs sorted by name read
    sweep-1, sweep-10, sweep-11, ..., sweep-2); a decimal is one number: lr0.01 and lr0.1 read
    as 0, ".", 1 both, and a sweep's learning rates sorted together by seed."""
    return tuple((0, float(part)) if part[0].isdigit() else (1, part.casefold())
                 for part in _PARTS.split(name) if part)
