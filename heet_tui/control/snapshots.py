"""Publishing snapshots latest-first, and the lock that makes one controller per state directory.

A slow UI must never stall the controller, and it has no use for a stale snapshot: each
subscriber waits for the version counter to move and then takes whatever is newest, so a
burst of updates coalesces into one.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path

from heet_tui.core.snapshot import Snapshot

LOCK_NAME = "controller.lock"


class SnapshotHub:
    def __init__(self) -> None:
        self._latest: Snapshot | None = None
        self._version = 0
        self._closed = False
        self._changed = asyncio.Condition()

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    async def publish(self, snapshot: Snapshot) -> None:
        async with self._changed:
            self._latest = snapshot
            self._version += 1
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self._closed = True
            self._changed.notify_all()

    async def stream(self) -> AsyncIterator[Snapshot]:
        seen = 0
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda s=seen: self._closed or self._version != s)
                if self._closed:
                    return
                seen, snapshot = self._version, self._latest
            if snapshot is not None:
                yield snapshot


class ControllerLock:
    """An exclusive ``flock`` on ``<state>/controller.lock``: held while a controller runs."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_NAME
        self._fh = None

    def acquire(self) -> None:
        # private like the rest of the state directory; held for the controller's lifetime
        fh = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            raise RuntimeError(f"another controller (pid {holder or '?'}) is running on {self.path.parent}; "
                               "open heet-tui with the same --state to attach to it") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def controller_running(state_dir: Path) -> int | None:
    """The pid of the controller holding the lock, or ``None`` when none runs."""
    path = state_dir / LOCK_NAME
    if not path.exists():
        return None
    try:  # for writing where it can be: NFS emulates flock with locks that need a writable file
        fh = open(path, "a+")  # noqa: SIM115 (closed below)
    except OSError:  # a read-only disk ("a+" failed `jobs` and `status` with a traceback): read only
        fh = open(path)  # noqa: SIM115
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            text = fh.read().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None
