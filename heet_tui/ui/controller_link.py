"""How the app knows its controller is alive: gone (the stream ended), silent (no snapshot for
much longer than its rounds take), or back again (an attached TUI re-attaches).

Without these the screens go on showing the last snapshot, which reads as live: hosts "seen 0s
ago", plans waiting, while the controller is dead or hung.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from textual import work

from heet_tui.ui.format import clock
from heet_tui.ui.messages import BackendFailed
from heet_tui.ui.screens.base import SnapshotScreen

AGE_EVERY_S = 1.0  # once the controller is gone or silent, how often "seen N s ago" moves on
REATTACH_EVERY_S = 3.0  # and how often an attached TUI looks for a controller running again
RETRY_EVERY_S = 2.0  # how often a TUI without a controller (a bad hosts file) looks at the file again
SILENT_AFTER_S = 20.0  # no snapshot for this long (or three rounds, when they are longer) is said


class ControllerLink:
    """Mixed into the app: uses its ``backend``, ``reattach``, ``retry``, ``stopped``, ``silent``,
    ``clock``, ``_last`` (the last snapshot and when it came), ``_stopped_timers``, ``_retry_timer``
    and ``_retried_at``."""

    def on_backend_failed(self, message: BackendFailed) -> None:
        """Say it for as long as it lasts, not in a toast: the screens go on showing the last
        snapshot, which without this reads as live."""
        if self.stopped:
            return
        at = clock(time.time(), "controller")
        if self.reattach is not None:
            self.stopped = (f"controller stopped at {at}: figures are as of then; start `heet-tui run` again "
                            "(this TUI attaches to it) or quit")
        else:
            self.stopped = f"controller stopped at {at}: figures are as of then; quit and start heet-tui again"
        self.notify(message.reason, title="controller stopped", severity="error", timeout=30)
        self.screen.refresh_bindings()  # the keys that ask the controller for something go
        self._stopped_timers = [self.set_interval(AGE_EVERY_S, self._show_aged)]
        if self.reattach is not None:
            self._stopped_timers.append(self.set_interval(REATTACH_EVERY_S, self._try_reattach))
        self._show_aged()

    def _show_aged(self) -> None:
        """The last snapshot with its clock moved on by the time since it came, so every "seen N s
        ago" keeps counting and hosts turn stale as they would if the controller still ran."""
        base = self.screen_stack[0] if self.screen_stack else None
        if self._last is not None:
            snap, arrived = self._last
            self.latest = replace(snap, now=snap.now + max(0.0, self.clock() - arrived))
        if isinstance(base, SnapshotScreen):
            if self.latest is not None:
                base.apply_snapshot(self.latest)
            else:  # it went before the first snapshot: the header still says so
                base.refresh_status()

    def _try_reattach(self) -> None:
        if not self._reattaching:
            self._reattaching = True
            self._reattach()

    @work(group="reattach")
    async def _reattach(self) -> None:
        assert self.reattach is not None
        try:
            backend = await self.reattach()
        except Exception:  # looked again in a few seconds
            backend = None
        finally:
            self._reattaching = False
        if backend is None:
            return
        old, self.backend = self.backend, backend
        for timer in self._stopped_timers:
            timer.stop()
        self._stopped_timers, self.stopped = [], ""
        self.screen.refresh_bindings()
        self._notices_total = None  # another controller's count: its latest news, as on a first attach
        if old is not None:
            try:
                await old.stop()
            except Exception:  # the old one is gone anyway
                pass
        self.clear_notifications()  # "controller stopped" stayed up for its 30 s beside this
        self.notify("the controller runs again: attached to it", title="controller", timeout=8)
        self._show_aged()  # the mark goes at once; the next snapshot brings the figures
        self._pump_snapshots(start=False)

    def start_controller_again(self, force: bool = False) -> None:
        """Start the controller once the hosts file that kept it from starting reads well: fixed (or
        back on its NFS mount), the TUI stayed "controller not available" until it was restarted.
        Tried when the file changes (or on ctrl+r, ``force``), not every few seconds regardless."""
        if self.backend is not None or self.retry is None:
            return
        stamp = file_stamp(self.hosts_path)
        if stamp == self._retried_at and not force:
            return
        self._retried_at = stamp
        base = self.screen_stack[0] if self.screen_stack else None
        if not force and (reload := getattr(base, "action_reload", None)) is not None:
            reload(toast=False)  # the Hosts screen shows the file's error as it is now, and calls back once it reads
            return
        choice = self.retry()
        if choice.backend is None:
            return
        self.backend, self.retry, self.reattach = choice.backend, None, choice.reattach
        if self._retry_timer is not None:
            self._retry_timer.stop()
        self._pump_snapshots()
        self.set_interval(AGE_EVERY_S, self.check_silence)
        self.screen.refresh_bindings()
        self.notify(choice.notice or f"hosts file read: the controller runs on {choice.hosts_path}",
                    title="controller", timeout=8)

    def check_silence(self) -> None:
        """Seen: a controller stopped with kill -STOP (or stuck in a round) left attached TUIs
        showing its last snapshot as live, for as long as it lasted. A controller publishes every
        round, so a long silence means it is not working, whatever the cause."""
        if self.stopped or self._last is None or self._last[0].mode != "controller":
            return  # the demo pauses on purpose
        snap, arrived = self._last
        silent_s = self.clock() - arrived
        if silent_s > max(SILENT_AFTER_S, 3 * snap.interval_s):
            self.silent = (f"no update from the controller for {silent_s:.0f} s (a very long round, or it hangs: "
                           f"stopped with kill -STOP?): figures are as of {clock(time.time() - silent_s, 'controller')}")
            self._show_aged()
        elif self.silent:
            self.silent = ""
            self._show_aged()


def file_stamp(path: Path | None) -> tuple | None:
    """When the file last changed, its content or its mode, and the modes and owners of the
    directories above it: a ``chmod go-w`` the refusal asked for, of the file or of a directory."""
    if path is None:
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    above = []
    for folder in path.absolute().parents:
        try:
            st = folder.stat()
        except OSError:
            break
        above.append((st.st_mode, st.st_uid))
    return info.st_mtime, info.st_ctime, info.st_size, info.st_mode, tuple(above)
