"""What the TUI takes from the controller's snapshot: a state store that refuses writes is said in
the header for as long as it lasts (a toast said it once, and the Jobs screen showed "53%  ETA 31s"
as live for minutes while nothing was recorded), and the policies it knows."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import FakeBackend, small_snapshot
from ui_support import run, wait_for

from heet_tui.ui.app import HeetApp
from heet_tui.ui.widgets.status_line import StatusLine

FULL = "state store /home/u/.local/state/heet-tui: cannot write (database or disk is full)"


def test_the_header_says_the_store_refuses_writes_until_it_takes_them_again(repo) -> None:
    backend = FakeBackend(replace(small_snapshot(0), store_error=FULL))

    async def scenario() -> None:
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster")
        async with app.run_test(size=(160, 40)) as pilot:
            header = lambda: str(app.screen.query_one(StatusLine).render())  # noqa: E731
            await wait_for(pilot, lambda: app.latest is not None)
            await wait_for(pilot, lambda: f"⚠ {FULL}: the controller changes nothing; jobs are shown as last "
                                          "recorded" in header())
            backend.push(small_snapshot(1))
            await wait_for(pilot, lambda: app.latest.now == 101.0 and "cannot write" not in header())

    run(scenario())


def test_the_palette_offers_the_controllers_own_policies(repo) -> None:
    """The names came from this TUI's own package: an attached controller of another version knows others."""
    from heet_tui.ui.dialogs.prompt import PromptDialog

    backend = FakeBackend(replace(small_snapshot(0), policies=("heet", "their-new-policy")))

    async def scenario() -> None:
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="cluster")
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            app.action_switch_policy()
            await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
            assert app.screen.suggestions == ("heet", "their-new-policy")

    run(scenario())
