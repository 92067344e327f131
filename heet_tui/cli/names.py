"""Naming what exists when a name is not found: a few close ones, not the whole list.

A lab's store holds hundreds of jobs and its hosts file dozens of hosts; every name in the
error made one line of 8 KB, in which the near miss was hard to find.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

SHOWN = 8
PATTERN_CHARS = "*?["  # a name with one of these is an fnmatch pattern (`cancel 'sweep-*'`)


def is_pattern(name: str) -> bool:
    return any(c in name for c in PATTERN_CHARS)


def known_names(names: Sequence[str], asked: str, what: str) -> str:
    """``"hosts: t4-1, t4-2"``, or ``"480 active jobs; closest: sa-lr0.1-s1, ..."`` when there are many."""
    if len(names) <= SHOWN:
        return f"{what}: {', '.join(names) or 'none'}"
    stem = re.split(r"[*?\[]", asked)[0] or asked  # a pattern's fixed start
    # a floor on likeness: "nosuchjob" was answered "closest: b74, b72, b71", which are nothing like it
    close = difflib.get_close_matches(stem, names, n=SHOWN, cutoff=0.5)
    starting = [n for n in names if stem and n.startswith(stem)][:SHOWN]
    shown = list(dict.fromkeys(starting + close))[:SHOWN]
    return f"{len(names)} {what}; closest: {', '.join(shown)}" if shown else f"{len(names)} {what}; none like it"
