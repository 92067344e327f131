"""What the controller does while the state store refuses writes (disk full, read-only disk).

A controller that cannot record what it does must not do it: a launch it could not record
would run unknown to the next controller, which would fence it. So while writes fail the
controller makes no changes (no rounds, events not acted on; jobs keep running on their
hosts), says so once, tries one small write each round, and goes on when one succeeds. It
used to print a traceback for every progress line and half-handle each event: a profiling
run it should have stopped after two reports ran on for minutes.

The events dropped meanwhile, and those half-handled when their writes failed, are not lost for
good: on going on, the controller does what a restarted one does (``resync``): it rebuilds the
runs the store says are running that it let go of, and acts on where every host and process
stands now. Without that, a job that finished during the outage stayed "running" for ever, or
was launched again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

from heet_tui.cluster import HostChanged, JobsReported
from heet_tui.control.execution import Executor
from heet_tui.control.notices import Notices
from heet_tui.control.recovery import rebuild_runs
from heet_tui.control.store import Store, StoreWriteError
from heet_tui.core.host import HostState

log = logging.getLogger(__name__)


class StoreHealth:
    def __init__(self, store: Store, clock: Callable[[], float], notices: Notices) -> None:
        self.store, self.clock, self.notices = store, clock, notices
        self.error: str | None = None  # why writes fail, while they do
        self._recovered = False
        self._inode = _inode(store.path)
        self.gone = False  # the store's file was deleted or replaced under the controller

    def failed(self, exc: StoreWriteError) -> None:
        if self.error is None:
            log.error("%s", exc)
            self.notices.append(f"{exc}: the controller makes no changes until it can write again "
                                "(jobs keep running on their hosts)", logged=True)
        self.error = str(exc)

    def writable(self) -> bool:
        """True when writes work (again); one small write a round finds out. Never again once the
        store's file is gone: writes to a deleted file succeed, and a controller went on for
        minutes recording into nothing while a new store took its place."""
        if self.gone or (what := _lost(self.store.path, self._inode)):
            if not self.gone:
                self.gone = True
                said = (f"the state store {self.store.path} was {what} while this controller ran: it "
                        "records and changes nothing from now on (jobs keep running on their hosts); stop it and "
                        "start heet-tui run on the state you keep")
                log.error("%s", said)
                self.notices.append(said, logged=True)
            return False
        if self.error is None:
            return True
        try:
            self.store.set_setting("last_write_check", repr(self.clock()))
        except StoreWriteError:
            return False
        self.store.add_event(self.clock(), "controller", f"state store writable again (after: {self.error})")
        self.error, self._recovered = None, True  # first: a snapshot with the notice said the outage on
        self.notices.append("the state store takes writes again: the controller goes on", logged=True)  # the event logs it
        return True

    async def resync(self, executor: Executor, cluster, handle: Callable[[object], Awaitable[None]]) -> None:
        """Once after writes came back: the dropped runs rebuilt, then each host's state and
        processes as the cluster knows them now, handled as the events that would have said so."""
        if not self._recovered:
            return
        self._recovered = False
        self.notices += rebuild_runs(self.store, executor, self.clock(), "a state store outage")
        for status in cluster.status():
            await handle(HostChanged(status.name, status))
            if status.state is HostState.READY:
                await handle(JobsReported(status.name, cluster.jobs(status.name)))


def _lost(path, inode: int | None) -> str:
    """How the store's file went from under the controller, or "". Emptied (``truncate -s 0``,
    ``> state.sqlite3``) it kept its inode, went unnoticed for minutes, and every write since
    went into the write-ahead log only."""
    try:
        st = os.stat(path)
    except OSError:
        return "deleted"
    if st.st_ino != inode:
        return "replaced"
    return "emptied (0 bytes)" if st.st_size == 0 else ""


def _inode(path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
