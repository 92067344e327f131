"""The Plan table's columns at the terminal sizes people use."""

from __future__ import annotations

import asyncio

from ui_fakes import small_snapshot
from ui_support import wait_for

from heet_tui.ui.widgets.keyed_table import GAP
from heet_tui.ui.widgets.plan_table import PlanTable


def test_at_80_columns_every_column_of_the_plan_shows_and_at_120_the_hosts_too(make_app, backend):
    """At 80x24 the restart pause, what a change costs, was off the screen and "Completes in"
    was cut to "Complete"; at 120x40 the last column was cut to "Restart pa"."""
    backend.current = small_snapshot()

    async def scenario(size: tuple[int, int]) -> tuple[str, str]:
        app = make_app("plan")
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.pause(0.2)
            table = app.screen.query_one(PlanTable)
            used = sum(table._widths) + GAP * (len(table._widths) - 1)
            assert used <= table.scrollable_content_region.width, (size, table._widths)
            return app.export_screenshot().replace("&#160;", " "), " ".join(str(c) for c in table.get_row("j1"))

    narrow, row = asyncio.run(scenario((80, 24)))
    assert "Pause" in narrow and "Done in" in narrow
    assert "@" not in row, "no host names at 80 columns"
    wide, row = asyncio.run(scenario((120, 40)))
    assert "@a100-1" in row and "Pause" in wide
