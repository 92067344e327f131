"""The heet-tui application: five screens fed by one backend's snapshot stream.

The app owns the backend. Snapshots arrive through a worker as replaceable messages, so a
burst collapses into the newest; only the visible screen redraws, the others catch up when
shown. Intents go to the backend in workers: nothing slow runs on the event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.timer import Timer

from heet_tui.core.backend import Backend
from heet_tui.core.intents import (
    WARNING_SEP,
    EditJob,
    Intent,
    SubmitJob,
    TrustHostKey,
)
from heet_tui.core.job import JobState
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import HostStatus, Snapshot
from heet_tui.ui.commands import HeetCommands
from heet_tui.ui.controller_link import AGE_EVERY_S, RETRY_EVERY_S, ControllerLink, file_stamp
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.help import HelpDialog
from heet_tui.ui.dialogs.host_key import HostKeyDialog, fingerprint_in, key_question_settled
from heet_tui.ui.dialogs.tweak import TweakDialog
from heet_tui.ui.messages import BackendFailed, IntentDone, IntentRequested, SnapshotArrived
from heet_tui.ui.palette_actions import PaletteActions
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.screens.cluster import ClusterScreen
from heet_tui.ui.screens.hosts import HostsScreen
from heet_tui.ui.screens.jobs import JobsScreen
from heet_tui.ui.screens.plan import PlanScreen
from heet_tui.ui.screens.profiles import ProfilesScreen

if TYPE_CHECKING:
    from heet_tui.ui.backends import BackendChoice

FIRST_NOTICES = 2  # of those published before the TUI's first snapshot, how many it shows
FIRST_NOTICE_AGE_S = 20.0  # ... and only when said this recently (older news is in the log)


SCREENS_GROUP = Binding.Group("Screens", compact=True)

class HeetApp(PaletteActions, ControllerLink, App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere still find it
    TITLE = "heet-tui"
    MODES = {"cluster": ClusterScreen, "jobs": JobsScreen, "plan": PlanScreen, "profiles": ProfilesScreen,
             "hosts": HostsScreen}
    COMMANDS = App.COMMANDS | {HeetCommands}
    # One footer entry for the five screens ("12345 Screens"; the status line names the one shown):
    # five entries pushed the screen's own keys and q off the footer, even at 120 columns.
    BINDINGS = [
        Binding("1", "switch_mode('cluster')", "Cluster", group=SCREENS_GROUP),
        Binding("2", "switch_mode('jobs')", "Jobs", group=SCREENS_GROUP),
        Binding("3", "switch_mode('plan')", "Plan", group=SCREENS_GROUP),
        Binding("4", "switch_mode('profiles')", "Profiles", group=SCREENS_GROUP),
        Binding("5", "switch_mode('hosts')", "Hosts", group=SCREENS_GROUP),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, backend: Backend | None, hosts_path: Path | None = None, read_only: bool = False,
                 notice: str = "", start_mode: str = "jobs",
                 reattach: Callable[[], Awaitable[Backend | None]] | None = None,
                 retry: Callable[[], BackendChoice] | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.reattach = reattach
        self.retry = retry  # no controller for want of a good hosts file: choose again once it is fixed
        # Set while the controller is gone: the one sentence the header shows and refusals repeat.
        self.stopped = ""
        self.silent = ""  # set while a live controller sends nothing (controller_link.py)
        self.clock = time.monotonic  # how long ago the last snapshot came (a test moves it on)
        self._last: tuple[Snapshot, float] | None = None  # the last snapshot from the backend, and when
        self._stopped_timers: list[Timer] = []
        self._reattaching = False
        self.hosts_path = hosts_path
        self.read_only = read_only
        self.notice = notice
        self.start_mode = start_mode
        self.latest: Snapshot | None = None
        self.select_next: str | None = None  # a job just submitted, for the Jobs screen to select once listed
        self.snapshots_seen = 0
        self._notices_total: int | None = None  # notices published up to the last snapshot
        self._keys_asked: set[tuple[str, str]] = set()
        self._keys_trusted: set[str] = set()  # fingerprints the user trusted in this app
        self._retry_timer: Timer | None = None
        self._retried_at = file_stamp(hosts_path)  # the hosts file as it was when the controller could not start

    def on_mount(self) -> None:
        # Everything alive after start-up (modules, widgets, styles) lives as long as the app; keeping it
        # out of the collector's scans keeps full collections, and so event-loop stalls, short.
        gc.freeze()
        self._stop_on_signals()
        self.switch_mode(self.start_mode)
        if self.notice:
            self.notify(self.notice, title="heet-tui", severity="warning", timeout=15)
        if self.backend is not None:
            self._pump_snapshots()
            self.set_interval(AGE_EVERY_S, self.check_silence)
        elif self.retry is not None:
            self._retry_timer = self.set_interval(RETRY_EVERY_S, self.start_controller_again)

    def _stop_on_signals(self) -> None:
        """SIGTERM, and SIGHUP (the SSH session to the login node dropped), end the app as q does:
        killed outright, it left the terminal in the alternate screen with mouse reporting on, and
        its controller stopped without a word in its log."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread (tests)
                loop.add_signal_handler(sig, lambda sig=sig: self.exit(return_code=128 + sig))

    @work(exclusive=True, group="snapshots")
    async def _pump_snapshots(self, start: bool = True) -> None:
        assert self.backend is not None
        try:
            if start:
                await self.backend.start()
            async for snap in self.backend.snapshots():
                self.post_message(SnapshotArrived(snap))
        except Exception as exc:  # the stream is the app's lifeline: say why it ended, keep the last view
            self.post_message(BackendFailed(str(exc) or "it failed without saying why"))
            return
        self.post_message(BackendFailed("it stopped publishing"))

    async def on_unmount(self) -> None:
        if self.backend is not None:
            try:
                await self.backend.stop()
            except Exception:  # shutting down: a failing stop must not hide the user's exit
                pass

    def on_snapshot_arrived(self, message: SnapshotArrived) -> None:
        snap = message.snapshot
        if snap.read_only and not self.read_only:  # attached to a watch-only controller: it would refuse them
            self.read_only = True
            self.refresh_bindings()
            self.notify("this controller only watches (started with --read-only): nothing can be changed here")
        self._last = (snap, self.clock())
        self.silent = ""
        self.latest = snap
        self.snapshots_seen += 1
        base = self.screen_stack[0] if self.screen_stack else None
        if isinstance(base, SnapshotScreen):
            base.apply_snapshot(snap)
        if isinstance(self.screen, TweakDialog):  # it compares with the plan it was opened on
            self.screen.plan_changed(snap.plan_id, snap.plan)
        for notice in self._new_notices(snap):
            self.notify(notice, timeout=6)
        self._offer_new_host_keys(snap.hosts)

    def _new_notices(self, snap: Snapshot) -> tuple[str, ...]:
        """The notices published since the last snapshot, by their running count: read by text, a
        notice said twice (the hosts file failing again) was shown once, and a TUI attaching to a
        controller that had run for hours toasted its last twenty at once. The first snapshot
        brings its latest ``FIRST_NOTICES``, the news from just before the TUI opened."""
        total = snap.notices_total or len(snap.notices)
        seen, first = self._notices_total, self._notices_total is None or total < self._notices_total
        if first:  # the first snapshot, or another controller's count
            seen = max(0, total - FIRST_NOTICES)
        self._notices_total = total
        new = min(total - seen, len(snap.notices))
        if new <= 0:
            return ()
        latest = range(len(snap.notices) - new, len(snap.notices))
        if first and len(snap.notices_at) == len(snap.notices):  # a minute-old "host added" read as news
            latest = [i for i in latest if time.time() - snap.notices_at[i] <= FIRST_NOTICE_AGE_S]  # wall clock
        return tuple(snap.notices[i] for i in latest)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Notices are plain text: they quote hosts' errors, paths and config problems, where markup
        would drop "[defaults]" from a hint and a stray "[/]" would crash the app."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- intents ---------------------------------------------------------------------------------

    def on_intent_requested(self, message: IntentRequested) -> None:
        if self.read_only:
            self.notify("read-only mode: nothing can be changed", severity="warning")
            return
        if self.backend is None:
            self.notify("controller not available: nothing can be changed yet", severity="error")
            return
        if self.stopped:
            self.notify(self.stopped, title="refused", severity="error", timeout=8)
            return
        self._send(message.intent, message.describe)

    @work(group="intents")
    async def _send(self, intent: Intent, describe: str) -> None:
        assert self.backend is not None
        try:
            result = await self.backend.post(intent)
        except ValueError as exc:
            self.post_message(IntentDone(intent, error=str(exc)))
            self.notify(f"{describe or type(intent).__name__}: {exc}", title="refused", severity="error", timeout=8)
            return
        except Exception as exc:  # a backend bug must surface as a notice, not kill the app
            self.post_message(IntentDone(intent, error=f"{type(exc).__name__}: {exc}"))
            self.notify(f"{describe}: {type(exc).__name__}: {exc}", title="failed", severity="error", timeout=10)
            return
        self.post_message(IntentDone(intent, result=result))
        done, _, warning = (result or f"{describe}: done").partition(WARNING_SEP)
        if isinstance(intent, SubmitJob) and done.startswith("submitted "):  # the Jobs screen selects it
            self.select_next = done.removeprefix("submitted ").split(",")[0].split(" ")[0]
        self.notify(done, timeout=4)
        if warning:  # a warning has something to act on: it stays long enough to read
            self.notify(warning, title="warning", severity="warning", timeout=20)

    async def preview(self, edit: EditJob) -> PredictedEffect:
        if self.backend is None:
            raise ValueError("controller not available: no prediction")
        if self.stopped:
            raise ValueError(self.stopped)
        return await self.backend.preview(edit)

    async def job_log(self, job_id: str) -> tuple[str, ...]:
        if self.backend is None:
            raise ValueError("controller not available: no logs")
        if self.stopped:
            raise ValueError(self.stopped)
        return await self.backend.job_log(job_id)

    def post_intent(self, intent: Intent, describe: str = "") -> None:
        self.post_message(IntentRequested(intent, describe))

    # -- host keys ---------------------------------------------------------------------------------

    def _offer_new_host_keys(self, hosts: tuple[HostStatus, ...]) -> None:
        """Ask once per host and fingerprint; declining leaves the host waiting, never trusted silently.
        A question the host no longer asks (its key trusted from the command line meanwhile) is
        closed: it stayed up, and took the keys meant for the screen under it."""
        if self.read_only:
            return
        dialog = self.screen  # dismissing pops the top screen: one under another dialog waits its turn
        if isinstance(dialog, HostKeyDialog) and key_question_settled(dialog.host, dialog.fingerprint, hosts):
            dialog.dismiss(None)
            now = next((h.state.value for h in hosts if h.name == dialog.host), "gone from the hosts file")
            self.notify(f"{dialog.host}: its key question is settled elsewhere (the host is now {now})", timeout=6)
        if isinstance(self.screen, ModalScreen):
            # a form or another question is open: asked over it, the question took the form's keys,
            # and the Tab and Enter meant for the form trusted a key nobody had read
            return
        for host in hosts:
            if host.state.awaits_trust:
                fp = fingerprint_in(host.message) or ""
                # a key the user trusted here already (a jump host's, for another host behind it)
                # is not asked about again: that host looks again at once and gets past it
                if (host.name, fp) not in self._keys_asked and fp not in self._keys_trusted:
                    self._keys_asked.add((host.name, fp))
                    self.ask_host_key(host)
                    return  # one dialog at a time; the next snapshot offers the next host

    def ask_host_key(self, host: HostStatus) -> None:
        fp = fingerprint_in(host.message)
        if fp is None:
            self.notify(f"{host.name}: unknown host key, but no fingerprint was reported: {host.message}",
                        severity="error")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._keys_trusted.add(fp)
                self.post_intent(TrustHostKey(host.name, fp), f"trust {host.name}")

        self.push_screen(HostKeyDialog(host.name, fp, host.message), answered)

    # -- palette and global actions -----------------------------------------------------------------

    def action_help_quit(self) -> None:
        """Ctrl+C: Textual's own words carry markup ("Press [b]ctrl+q[/b]"), which plain notices
        (notify above) showed as typed."""
        keys = [k for k, b in self.active_bindings.items() if b.binding.action in ("quit", "app.quit")]
        self.notify(f"Press {min(keys, key=len) if keys else 'q'} to quit", title="Do you want to quit?")

    async def action_quit(self) -> None:
        """Quitting the TUI that runs the controller stops it for every viewer attached to it:
        other TUIs (which then read "controller stopped") and log -f. Asked first when there are any."""
        if isinstance(self.screen, ConfirmDialog):
            return  # asked already (this one, or another question on top)
        snap = self.latest
        watched = self.reattach is None and not self.stopped and snap is not None and snap.mode == "controller"
        if not (watched and snap is not None and snap.viewers):
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmDialog(
            f"{snap.viewers} other viewer(s) are attached to the controller this TUI runs (other TUIs, log -f): "
            "quitting stops it for them too, and the jobs train on unwatched. Quit?", yes="Quit"), answered)

    def action_help(self) -> None:
        self.push_screen(HelpDialog())


def run_app(args: argparse.Namespace) -> int:
    """Entry point of ``heet-tui`` without a subcommand: pick the backend, run until the user quits."""
    from heet_tui.ui.backends import choose_backend

    choice = choose_backend(args)
    app = HeetApp(choice.backend, choice.hosts_path, read_only=bool(getattr(args, "read_only", False)),
                  notice=choice.notice, start_mode=choice.start_mode, reattach=choice.reattach, retry=choice.retry)
    app.run()
    if choice.reattach is None and (left := left_running(app.latest)):
        print(left)
    return app.return_code or 0  # 1 after a crash (its traceback is above): it exited 0


def left_running(snap: Snapshot | None) -> str:
    """What a user quitting the TUI's own controller leaves behind: its jobs train on, unwatched
    (nothing said so, and a quit looked like a stop)."""
    if snap is None or snap.mode != "controller":
        return ""
    running = [j.id for j in snap.jobs if j.state is JobState.RUNNING]
    waiting = sum(not j.state.terminal and j.state is not JobState.RUNNING for j in snap.jobs)
    wait = f"; {waiting} queued job(s) wait until it runs" if waiting else ""  # they sat idle, unsaid
    if not running:
        return f"{waiting} queued job(s) wait until heet-tui or heet-tui run runs again" if waiting else ""
    shown = ", ".join(running[:5]) + (f" and {len(running) - 5} more" if len(running) > 5 else "")
    return (f"{len(running)} job(s) still train on their hosts ({shown}), unwatched: heet-tui or heet-tui run "
            f"watches them again, from where they are{wait}")
