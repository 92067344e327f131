"""Profiles screen: a job's heat map, and what it says when nothing is known of the job."""

from __future__ import annotations

from dataclasses import replace

from textual.geometry import Region
from textual.widgets import Static
from ui_fakes import small_snapshot, with_job
from ui_support import SIZE, run, wait_for

from heet_tui.core.snapshot import JobProfile, ProfileCell
from heet_tui.ui.widgets.keyed_table import KeyedTable

WHY = "its profiling runs measured no throughput"


def test_a_job_with_nothing_measured_says_why_instead_of_an_empty_heat_map(make_app, backend):
    # An empty heat map rendered as a column of broken words ("samples/", "placemen", "t").
    snap = with_job(small_snapshot(), "j3", message=WHY)
    backend.current = replace(snap, profiles=(*snap.profiles, JobProfile("j3", ())))

    async def scenario():
        app = make_app("profiles")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one("#profile-jobs", KeyedTable)
            await wait_for(pilot, lambda: table.row_count == 2)
            view = app.screen.query_one("#heatmap", Static)
            assert table.selected_key == "j1"
            await pilot.press("down")
            await wait_for(pilot, lambda: table.selected_key == "j3")
            await pilot.pause()
            shown = str(view.render())
            assert "j3: nothing measured or predicted yet" in shown and WHY in shown
            hidden = app.screen.query_one("#profiles-hidden", Static)
            assert not hidden.display, "nothing left out: nothing said"
            backend.push(replace(backend.current, profiles_hidden=12))
            await wait_for(pilot, lambda: hidden.display and str(hidden.render()) == "12 older ended jobs not listed")

    run(scenario())


def test_on_a_narrow_terminal_the_heat_map_goes_below_the_job_list(make_app):
    # Beside the list, an 80-column terminal left the map 44 columns: every cell read "●…".
    async def scenario():
        app = make_app("profiles")
        async with app.run_test(size=(80, 30)) as pilot:
            view = app.screen.query_one("#profile-view")
            jobs = app.screen.query_one("#profile-jobs", KeyedTable)
            await wait_for(pilot, lambda: jobs.row_count == 1)
            assert view.region.width == 80 and view.region.y >= jobs.region.bottom
            await pilot.resize_terminal(140, 30)
            await pilot.pause()
            assert view.region.x >= jobs.region.right and view.region.y == jobs.region.y

    run(scenario())


def test_at_80_columns_the_heat_map_cuts_no_figure(make_app, backend):
    # With "/s" on every figure, three GPU types and seven placements, Rich cut the cells to "●9240…".
    scaling = (("1", 1), ("2", 1.9), ("4", 3.5), ("8", 6), ("44", 6.4), ("88", 9.3), ("4444", 11))
    cells = [ProfileCell(t, c, one * n, measured=(c == "1"), uncertainty=None if c == "4444" else 0.67)
             for t, one in (("A100", 9240.0), ("RTX2080Ti", 3292.0), ("T4", 1439.0)) for c, n in scaling]
    snap = small_snapshot()
    backend.current = replace(snap, profiles=(JobProfile("j1", tuple(cells)),))

    async def scenario():
        app = make_app("profiles")
        async with app.run_test(size=(80, 30)) as pilot:
            view = app.screen.query_one("#heatmap", Static)

            def shown() -> str:  # what the terminal shows of it
                return "\n".join(line.text for line in view.render_lines(Region(0, 0, *view.size)))

            await wait_for(pilot, lambda: "samples/s" in shown())
            assert "…" not in shown(), shown()
            assert "●9240" in shown() and "~102k" in shown() and "RTX2080Ti" in shown()

    run(scenario())
