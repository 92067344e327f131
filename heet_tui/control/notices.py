"""What the controller tells the user once (the TUI's toasts, `heet-tui run`'s "notice" lines).

A plain list grew by one line per applied plan for as long as the controller ran. This one
keeps the latest ``KEEP`` and counts every line ever added, so a reader that remembers the
count it has seen gets exactly the new ones, however many were trimmed meanwhile. Each is
logged too: a hosts file the controller could not reload was said on the terminal, and
controller.log, where the help sends users, had no line of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

KEEP = 200
log = logging.getLogger(__name__)


class Notices(list[str]):
    def __init__(self) -> None:
        super().__init__()
        self.total = 0  # lines ever added
        self.times: list[float] = []  # when each kept line was added: `status` showed an old one as news

    def append(self, notice: str, logged: bool = False) -> None:
        """``logged``: the caller logged it already (at its own level, with its traceback)."""
        self._add((notice,), logged)

    def extend(self, notices: Iterable[str]) -> None:
        self._add(list(notices), False)

    def _add(self, added: Iterable[str], logged: bool) -> None:
        added = list(added)
        for notice in added if not logged else ():
            log.info("notice: %s", notice)
        super().extend(added)
        self.times.extend([time.time()] * len(added))
        self.total += len(added)
        if len(self) > KEEP:
            del self[:len(self) - KEEP]
            del self.times[:len(self.times) - KEEP]

    def __iadd__(self, notices: Iterable[str]) -> Notices:  # type: ignore[override]
        self.extend(notices)
        return self

    def since(self, seen: int) -> list[str]:
        """The lines added after the first ``seen`` (those still kept)."""
        new = min(len(self), self.total - seen)
        return list(self[len(self) - new:]) if new > 0 else []
