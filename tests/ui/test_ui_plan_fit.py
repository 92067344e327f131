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


def _starting_j3_on(hosts: dict[str, list[int]]):
    """The fake snapshot with its plan starting j3 on ``hosts`` (T4s) instead."""
    from dataclasses import replace

    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import Plan

    snap = small_snapshot()
    current = {j.id: j.allocation for j in snap.jobs if j.allocation is not None}
    proposed = dict(current, j3=Allocation.of("j3", "T4", hosts))
    return replace(snap, plan=Plan.build(current, proposed, "heet", 100.0, snap.plan.effect))


def _proposed_for_j3(make_app, size: tuple[int, int]) -> str:
    async def scenario() -> str:
        app = make_app("plan")
        async with app.run_test(size=size) as pilot:
            table = app.screen.query_one(PlanTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            await pilot.pause(0.2)
            used = sum(table._widths) + GAP * (len(table._widths) - 1)
            assert used <= table.scrollable_content_region.width, (size, table._widths)
            return str(table.get_row("j3")[3])

    return asyncio.run(scenario())


def test_a_job_over_two_hosts_names_both_where_they_fit_and_counts_the_rest_otherwise(make_app, backend):
    """At 160 columns a job over t4-1 and t4-2 read "2xT4 @t4-1 +1": the second host hidden, with
    room to spare."""
    backend.current = _starting_j3_on({"t4-1": [1], "t4-2": [0]})
    assert _proposed_for_j3(make_app, (160, 40)) == "2xT4 @t4-1,t4-2"
    assert _proposed_for_j3(make_app, (100, 40)) == "2xT4 @t4-1 +1", "narrow: one name and a count"
    backend.current = _starting_j3_on({"t4-1": [1], "t4-2": [0], "t4-3": [0]})
    assert _proposed_for_j3(make_app, (160, 40)) == "3xT4 @t4-1 +2", "more than two: one name and a count"


def test_two_host_names_too_long_for_the_room_keep_the_short_form() -> None:
    from heet_tui.core.allocation import Allocation
    from heet_tui.ui.widgets.plan_table import short_alloc

    across = Allocation.of("j", "RTX2080Ti", {"node-007-rtx2080ti": [0], "node-015-rtx2080ti": [1]})
    assert short_alloc(across, room=60) == "2xRTX2080Ti @node-007-rtx2080ti,node-015-rtx2080ti"
    assert short_alloc(across, room=40) == "2xRTX2080Ti @node-007-rtx2080ti +1"
