"""Seen: q in the TUI that ran the controller stopped it at once for two other TUIs attached to
it (they read "controller stopped") and for a log -f, without a word to whoever quit."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import FakeBackend, small_snapshot
from ui_support import run, wait_for

from heet_tui.ui.app import HeetApp
from heet_tui.ui.dialogs.confirm import ConfirmDialog

SIZE = (120, 40)


def test_quitting_the_controllers_tui_asks_first_while_others_watch(repo):
    backend = FakeBackend(replace(small_snapshot(0), viewers=2))

    async def scenario():
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert "2 other viewer(s) are attached" in str(app.screen.question)
            await pilot.press("q")  # again: one question, not two
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog))
            assert app.is_running, "still running: nobody lost their controller"
            backend.push(replace(small_snapshot(1), viewers=0))  # the others left
            await wait_for(pilot, lambda: app.latest.viewers == 0)
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running)

    run(scenario())


def test_an_attached_tui_quits_at_once(repo):
    async def never_back():
        return None

    backend = FakeBackend(replace(small_snapshot(0), viewers=3))

    async def scenario():
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster", reattach=never_back)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running)

    run(scenario())


def test_ctrl_c_says_how_to_quit_in_plain_words(repo):
    """It showed Textual's markup as typed: "Press [b]ctrl+q[/b] to quit the app"."""
    backend = FakeBackend(small_snapshot(0))

    async def scenario():
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("ctrl+c")
            await wait_for(pilot, lambda: any(n.title == "Do you want to quit?" for n in app._notifications))
            said = next(n for n in app._notifications if n.title == "Do you want to quit?")
            assert said.message == "Press q to quit" and not said.markup, said
            assert app.is_running

    run(scenario())
