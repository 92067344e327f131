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


@pytest.mark.parametrize("width", [80, 64, 60])  # at 64 the Plan and Hosts footers lost q Quit; at 60 Jobs
@pytest.mark.parametrize("mode", SCREENS)
def test_every_footer_key_shows_at_80_columns(make_app, mode, width):

    async def scenario():
        app = make_app(mode)
        async with app.run_test(size=(width, 24)) as pilot:
            def hidden() -> list[str]:
                keys = list(app.screen.query(FooterKey))
                return [f"{k.key_display} {k.description}" for k in keys if not fully_shown(app, k)]

            # the footer recomposes compact after its first refresh: under load one pause was not enough
            await wait_for(pilot, lambda: "q Quit" in footer(app) and "^p palette" not in footer(app) and not hidden())
            assert not hidden(), f"{mode}: cut off or covered at {width} columns: {hidden()}"
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


def test_every_jobs_key_shows_at_80_columns_for_a_failed_job_with_an_edit(make_app, backend):
    """The most keys the Jobs screen offers at once (retry, update, log, drop edit): "12345 Scree"
    was the last thing seen, q Quit cut off."""
    from dataclasses import replace

    from ui_fakes import small_snapshot, with_job

    from heet_tui.core.job import JobState
    from heet_tui.core.sched_input import Constraints

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: "q Quit" in footer(app))
            snap = with_job(small_snapshot(1), "j1", state=JobState.FAILED, edit=Constraints(pinned_type="A100"))
            backend.push(replace(snap, mode="controller"))
            from heet_tui.ui.widgets.job_table import JobTable

            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 4)
            table.select_key("j1")

            def hidden() -> list[str]:
                return [f"{k.key_display} {k.description}" for k in app.screen.query(FooterKey)
                        if not fully_shown(app, k)]

            await wait_for(pilot, lambda: "d Drop edit" in footer(app) and "r Retry" in footer(app))
            for _ in range(50):
                if not hidden():
                    break
                await pilot.pause(0.02)
            assert not hidden(), (hidden(), footer(app))

    run(scenario())


def test_the_footer_is_laid_out_again_when_a_resize_changes_what_fits(make_app, backend):
    """Built at 60 columns, Sort and Filter stayed out back at 80; built at 80 for a failed job
    with an edit, the keys pushed q Quit off at 60."""
    from dataclasses import replace

    from ui_fakes import small_snapshot, with_job

    from heet_tui.core.job import JobState
    from heet_tui.core.sched_input import Constraints
    from heet_tui.ui.widgets.job_table import JobTable

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(60, 24)) as pilot:
            snap = with_job(small_snapshot(1), "j1", state=JobState.FAILED, edit=Constraints(pinned_type="A100"))
            backend.push(replace(snap, mode="controller"))
            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 4)
            table.select_key("j1")
            await wait_for(pilot, lambda: "d Drop edit" in footer(app) and "q Quit" in footer(app))
            assert "s Sort" not in footer(app), "given up at 60 columns for the job's own keys"
            await pilot.resize_terminal(90, 24)
            await wait_for(pilot, lambda: "s Sort" in footer(app) and "/ Filter" in footer(app))
            await pilot.resize_terminal(60, 24)
            await wait_for(pilot, lambda: "s Sort" not in footer(app) and "q Quit" in footer(app) and not [
                k for k in app.screen.query(FooterKey) if not fully_shown(app, k)])

    run(scenario())


@pytest.mark.parametrize("width", [50, 42, 40])
def test_on_a_very_narrow_terminal_quit_stays_and_the_screen_keys_go_as_a_group(make_app, backend, width):
    """At 40-50 columns with a held job selected, q Quit fell off, and the screen keys were cut
    to "345 Screens", as if there were three."""
    from dataclasses import replace

    from ui_fakes import small_snapshot, with_job

    from heet_tui.core.job import JobState
    from heet_tui.core.sched_input import Constraints
    from heet_tui.ui.widgets.job_table import JobTable

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(width, 24)) as pilot:
            snap = with_job(small_snapshot(1), "j1", state=JobState.FAILED, edit=Constraints(pinned_type="A100"))
            backend.push(replace(snap, mode="controller"))
            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 4)
            table.select_key("j1")

            def cut() -> list[str]:
                return [k.description for k in app.screen.query(FooterKey) if not fully_shown(app, k)]

            await wait_for(pilot, lambda: "q Quit" in footer(app) and "? Help" in footer(app) and not cut())
            screens = [k for k in footer(app) if k.strip().isdigit()]
            assert len(screens) in (0, 5), footer(app)

    run(scenario())
