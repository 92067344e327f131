"""A TUI whose controller dies says so for as long as it lasts, and attaches again when one runs.

Seen: `heet-tui run` killed with kill -9; the attached TUI showed a toast "no more updates:
ControllerGone: …" that went away, then the last snapshot as if live (hosts ready, "seen 0s
ago"), and the footer's actions were refused with the controller's own words.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial

from ui_fakes import FakeBackend, small_snapshot
from ui_support import run, wait_for

from heet_tui.control.attach import AttachServer, socket_path
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.snapshots import SnapshotHub
from heet_tui.control.threaded import ThreadedBackend
from heet_tui.core.durations import duration
from heet_tui.core.intents import DrainHost
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui import app as app_module
from heet_tui.ui import controller_link
from heet_tui.ui.app import HeetApp
from heet_tui.ui.backends import reattach
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.widgets.host_table import HostTable
from heet_tui.ui.widgets.status_line import StatusLine

SIZE = (120, 40)


class DyingBackend(FakeBackend):
    """Streams like the attached backend does, until its controller goes."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = asyncio.Event()

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        while not self.gone.is_set():
            getter = asyncio.ensure_future(self._queue.get())
            waiter = asyncio.ensure_future(self.gone.wait())
            done, _ = await asyncio.wait({getter, waiter}, return_when=asyncio.FIRST_COMPLETED)
            getter.cancel()
            waiter.cancel()
            if getter in done:
                yield getter.result()
        raise ControllerGone("the controller (pid 4242) stopped; start it again (heet-tui run), or reopen "
                             "heet-tui to run one in the TUI")


def header(app) -> str:
    return str(app.screen.query_one(StatusLine).render())


def seen(app, host: str) -> str:
    return app.screen.query_one(HostTable).get_row(host)[7]


async def never_back() -> None:
    return None


def test_a_dead_controller_is_said_plainly_and_for_good_and_the_figures_age(repo):
    backend = DyingBackend()
    elapsed = [0.0]

    async def scenario():
        app = _on_a_clock(repo, backend, elapsed)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            assert seen(app, "a100-1") == "1s ago"  # last_seen 99, now 100
            backend.gone.set()
            await wait_for(pilot, lambda: "controller stopped at" in header(app))
            assert "figures are as of then" in header(app) and "heet-tui run" in header(app)
            elapsed[0] = 120.0  # two minutes without a word from the controller
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: seen(app, "a100-1") == duration(121.0) + " ago", tries=200)
            assert "stale" in table.get_row("a100-1")[2].plain, "a host not heard from is stale, not ready"
            # the keys that ask the controller for something are no longer offered: the footer
            # showed p, t and n, each refused once tried
            assert app.screen.check_action("drain", ()) is False
            await pilot.press("d")  # drain: needs the controller
            await pilot.pause()
            assert backend.posted == []
            app.post_intent(DrainHost("a100-1", True), "drain a100-1")  # asked another way: refused, saying why
            await wait_for(pilot, lambda: any(n.title == "refused" for n in app._notifications))
            refusal = next(n for n in app._notifications if n.title == "refused")
            assert refusal.message == app.stopped and backend.posted == []
            app.switch_mode("plan")
            await pilot.pause()
            assert "controller stopped at" in header(app), "every screen says it"
            await pilot.pause(app_module.AGE_EVERY_S + 0.2)  # the toasts have been shown, the mark stays
            assert "controller stopped at" in header(app)
            said = [n.message for n in app._notifications] + [header(app)]
            assert not any("ControllerGone" in text or "Error" in text for text in said), said

    run(scenario())


class Served(FakeBackend):
    """What a controller serves to attached TUIs: every subscriber gets the latest snapshot."""

    def __init__(self, first: Snapshot) -> None:
        super().__init__(first)
        self.hub = SnapshotHub()

    async def start(self) -> None:
        await self.hub.publish(self.current)

    def snapshots(self) -> AsyncIterator[Snapshot]:
        return self.hub.stream()


async def serve(backend: Served, state) -> AttachServer:
    await backend.start()
    server = AttachServer(backend, state)
    await server.start()
    return server


def test_an_attached_tui_attaches_again_when_a_controller_runs_again(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setattr(controller_link, "REATTACH_EVERY_S", 0.1)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    first, second = Served(small_snapshot(0)), Served(small_snapshot(5))

    async def scenario():
        server = await serve(first, state)
        app = HeetApp(ThreadedBackend(lambda: AttachedBackend(state)), repo / "configs" / "local.toml",
                      start_mode="cluster", reattach=partial(reattach, state))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None, tries=500)
            await server.close()
            # killed, not stopped: its socket file stays behind and refuses connections
            with socket.socket(socket.AF_UNIX) as stale:
                stale.bind(str(socket_path(state)))
            await wait_for(pilot, lambda: "controller stopped at" in header(app), tries=500)
            await pilot.pause(0.5)  # a few tries at the dead socket: still gone, nothing breaks
            assert app.stopped
            server = await serve(second, state)
            try:
                await wait_for(pilot, lambda: not app.stopped and app.latest.now == 105.0, tries=500)
                assert "controller stopped" not in header(app)
                # nor its 30 s toast beside "the controller runs again"
                titles = [n.title for n in app._notifications]
                assert "controller stopped" not in titles and "controller" in titles, titles
                await pilot.press("d")  # a100-1, where j1 runs: asked first
                await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
                await pilot.press("y")
                await wait_for(pilot, lambda: second.posted, tries=500)
                assert isinstance(second.posted[0], DrainHost)
            finally:
                await server.close()

    run(scenario())


def test_reattach_knocks_only_where_a_controller_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    state = tmp_path / "state"
    state.mkdir(mode=0o700)

    async def scenario():
        assert await reattach(state) is None  # no controller ever ran here
        server = await serve(Served(small_snapshot(3)), state)
        backend = await reattach(state)
        try:
            assert backend is not None
            snap = await asyncio.wait_for(anext(backend.snapshots()), 10)
            assert snap.now == 103.0
        finally:
            await backend.stop()
            await server.close()
        assert await reattach(state) is None  # it stopped: gone again

    run(scenario())


def _on_a_clock(repo, backend, elapsed: list[float]) -> HeetApp:
    """An attached TUI whose clock reads ``elapsed[0]``: a test moves time on by hand."""
    app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster", reattach=never_back)
    app.clock = lambda: elapsed[0]
    return app


async def _silent_said_only_past(pilot, app, elapsed: list[float], quiet_s: float, said_s: float) -> None:
    elapsed[0] = quiet_s
    await pilot.pause(controller_link.AGE_EVERY_S + 0.2)
    assert "no update" not in header(app)
    elapsed[0] = said_s
    await wait_for(pilot, lambda: f"no update from the controller for {said_s:.0f} s" in header(app), tries=200)


def test_a_silent_controller_is_said_until_it_speaks_again(repo):
    """Seen: `heet-tui run` stopped with kill -STOP; the attached TUI showed its last snapshot as
    live (hosts "seen 0s ago", plans waiting) for as long as it was stopped."""
    backend = FakeBackend(replace(small_snapshot(0), interval_s=2.0))
    elapsed = [0.0]

    async def scenario():
        app = _on_a_clock(repo, backend, elapsed)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await _silent_said_only_past(pilot, app, elapsed, 10.0, 45.0)  # five rounds late: not yet a word
            assert seen(app, "a100-1") == duration(46.0) + " ago", "the figures age"
            assert not app.stopped, "still attached: it may come back"
            backend.push(replace(small_snapshot(1), interval_s=2.0))  # it speaks again
            await wait_for(pilot, lambda: app.latest.now == 101.0 and "no update" not in header(app))

    run(scenario())


def test_a_controller_with_long_rounds_is_not_called_silent_between_them(repo):
    backend = FakeBackend(replace(small_snapshot(0), interval_s=60.0))  # heet-tui run --interval 60
    elapsed = [0.0]

    async def scenario():
        app = _on_a_clock(repo, backend, elapsed)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await _silent_said_only_past(pilot, app, elapsed, 150.0, 200.0)

    run(scenario())
