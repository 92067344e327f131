"""Names ordered as people number them: sweep-2 before sweep-10, rack1-h9 before rack1-h10."""

from __future__ import annotations

import re

_PARTS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Digit runs compare as numbers and the rest as text (a sweep of 40 jobs sorted by name read
    sweep-1, sweep-10, sweep-11, ..., sweep-2)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part.casefold())
                 for part in _PARTS.split(name) if part)
