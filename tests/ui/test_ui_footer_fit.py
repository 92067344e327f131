"""Every screen's footer keys show on an 80-column terminal.

Textual's footer kept "^p palette" docked at the right and cut the screen's keys short of it: at
80 columns the Jobs screen ended at "1234" (no screen group, no Quit) and the Hosts screen at
"12345 Scre".
"""

from __future__ import annotations

import pytest
from textual.widgets._footer import FooterKey
from ui_support import footer, fully_shown, run, wait_for

SCREENS = ["cluster", "jobs", "plan", "profiles", "hosts"]


@pytest.mark.parametrize("mode", SCREENS)
def test_every_footer_key_shows_at_80_columns(make_app, mode):

    async def scenario():
        app = make_app(mode)
        async with app.run_test(size=(80, 24)) as pilot:
            def hidden() -> list[str]:
                keys = list(app.screen.query(FooterKey))
                return [f"{k.key_display} {k.description}" for k in keys if not fully_shown(app, k)]

            # the footer recomposes compact after its first refresh: under load one pause was not enough
            await wait_for(pilot, lambda: "q Quit" in footer(app) and "^p palette" not in footer(app) and not hidden())
            assert not hidden(), f"{mode}: cut off or covered at 80 columns: {hidden()}"
            assert "^p palette" not in footer(app), "the palette key gives way (ctrl+p still opens it)"

    run(scenario())


def test_the_palette_key_comes_back_on_a_wide_terminal(make_app):

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: "q Quit" in footer(app))
            await pilot.resize_terminal(120, 30)
            await wait_for(pilot, lambda: "^p palette" in footer(app))
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")

    run(scenario())
