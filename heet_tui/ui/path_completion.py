"""Completing a typed path (a job.toml, a directory of them, a glob's start) as a shell does.

The submit prompt completed only from the bundled examples, so a path of the user's own got
no help at all, and its list of examples stayed the same whatever was typed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import islice

from textual.suggester import Suggester

MAX_ENTRIES = 2000  # a directory read per keystroke: a huge one is cut, not listed whole


def path_matches(typed: str, choices: Sequence[str] = (), limit: int = 20) -> list[str]:
    """What ``typed`` may become: the ``choices`` it starts, then the directory entries (job
    files and directories, with a ``/``) that its last part starts. Each starts with ``typed``,
    as typed (``~`` stays ``~``)."""
    found = [c for c in choices if c.startswith(typed) and c != typed]
    folder, start = os.path.split(os.path.expanduser(typed))
    if not any(c in typed for c in "*?["):
        found += [typed + name[len(start):] for name in _entries(folder or ".", start)]
    return list(dict.fromkeys(found))[:limit]


def _entries(folder: str, start: str) -> list[str]:
    try:
        with os.scandir(folder) as it:
            fitting = [e for e in islice(it, MAX_ENTRIES) if e.name.startswith(start)
                       and (start.startswith(".") or not e.name.startswith("."))]
            return sorted(e.name + "/" if e.is_dir() else e.name for e in fitting
                          if e.is_dir() or e.name.endswith(".toml"))
    except OSError:
        return []


class PathSuggester(Suggester):
    """The first of ``path_matches``: the Input shows it after the cursor, Tab takes it. The
    dialog's list of what fits asks ``matches`` for the same text: one directory read a
    keystroke, not one for the suggestion and one for the list."""

    def __init__(self, choices: Sequence[str] = ()) -> None:
        super().__init__(use_cache=False, case_sensitive=True)  # the filesystem changes under it
        self.choices = tuple(choices)
        self._last: tuple[str, list[str]] | None = None

    def matches(self, typed: str) -> list[str]:
        if self._last is None or self._last[0] != typed:
            self._last = (typed, path_matches(typed, self.choices))
        return self._last[1]

    async def get_suggestion(self, value: str) -> str | None:
        found = self.matches(value) if value else []
        return found[0] if found else None
