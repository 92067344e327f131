"""The log view (`l`) follows the job's output: a user watching the loss pressed r over and over."""

from __future__ import annotations

import pytest
from ui_support import footer, run, wait_for

from heet_tui.ui.dialogs.base import DialogBox
from heet_tui.ui.dialogs.job_log import JobLogDialog


def test_the_log_view_follows_keeps_a_scrolled_up_place_and_f_pauses(make_app, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(JobLogDialog, "FOLLOW_S", 0.05)
    written: list[str] = [f"step {i}" for i in range(100)]

    async def fetch(job_id: str) -> tuple[str, ...]:
        if len(written) < 110:  # the job writes on between reads, then goes quiet
            written.append(f"step {len(written)}")
        return (f"{job_id} generation 1, rank 0 on h1, last {len(written)} line(s):", *written)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            dialog = JobLogDialog("j1", fetch)
            app.push_screen(dialog)
            await wait_for(pilot, lambda: app.screen is dialog and bool(dialog.query(DialogBox)))
            box = dialog.query_one(DialogBox)
            await wait_for(pilot, lambda: dialog.fetches >= 12)  # read again without r
            assert "step 109" in str(dialog.query_one("#log").render())
            assert box.border_subtitle == "following: f pauses"
            assert "f Pause" in footer(app) and "f Follow" not in footer(app), "says what f does now"
            await wait_for(pilot, lambda: box.max_scroll_y > 0 and box.scroll_y == box.max_scroll_y)

            def parked() -> bool:  # scrolled up; a scroll to the end asked for by an earlier read may land first
                if box.scroll_y == 10:
                    return True
                box.scroll_to(y=10, animate=False, immediate=True)
                return False

            await wait_for(pilot, parked)
            await pilot.pause()
            await wait_for(pilot, parked)
            # held where it is: the last 200 lines read again slid under the reader once the log was longer
            await pilot.pause(0.1)
            seen = dialog.fetches
            await pilot.pause(0.4)
            assert dialog.fetches == seen and box.scroll_y == 10, "the place being read was kept, unread"
            assert box.border_subtitle.startswith("scrolled up: held here")
            box.scroll_end(animate=False, immediate=True)  # back at the end: it follows again
            await wait_for(pilot, lambda: dialog.fetches >= seen + 2)
            assert box.border_subtitle == "following: f pauses"
            await wait_for(pilot, lambda: box.scroll_y == box.max_scroll_y)
            box.scroll_to(y=box.max_scroll_y - 1, animate=False, immediate=True)  # one line up (it snapped back)
            await wait_for(pilot, lambda: box.border_subtitle.startswith("scrolled up"))
            await pilot.pause(0.1)
            held = dialog.fetches
            await pilot.pause(0.4)
            assert dialog.fetches == held
            box.scroll_end(animate=False, immediate=True)
            await wait_for(pilot, lambda: dialog.fetches > held)
            await pilot.press("f")
            assert not dialog.following and box.border_subtitle.startswith("paused")
            await pilot.pause(0.1)
            paused_at = dialog.fetches
            await pilot.pause(0.4)
            assert dialog.fetches == paused_at, "paused: no more reads"
            await pilot.press("r")  # r still reads at once
            await wait_for(pilot, lambda: dialog.fetches == paused_at + 1)
            await wait_for(pilot, lambda: "f Follow" in footer(app) and "f Pause" not in footer(app))
            await pilot.press("f")
            assert dialog.following and box.border_subtitle == "following: f pauses"
            await wait_for(pilot, lambda: dialog.fetches > paused_at + 2)
            await wait_for(pilot, lambda: "f Pause" in footer(app))

    run(scenario())


def test_tabs_in_a_log_line_keep_the_box_square(make_app):
    """A tab drawn as one cell pushed the view's right border out of line."""
    async def fetch(job_id: str) -> tuple[str, ...]:
        return (f"{job_id} generation 1, rank 0 on h1, last 1 line(s):", "a\tb\tc")

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            dialog = JobLogDialog("j1", fetch)
            app.push_screen(dialog)
            await wait_for(pilot, lambda: dialog.fetches >= 1)
            assert str(dialog.query_one("#log").render()).startswith("a       b       c")

    run(scenario())


def test_a_log_that_cannot_be_read_names_the_job_once(make_app):
    """It read "counter3: counter3: cannot read its log on w49a: ...": the controller's message
    names the job already."""
    async def fails(job_id: str) -> tuple[str, ...]:
        raise ValueError(f"{job_id}: cannot read its log on h1: host h1 is unreachable")

    async def bare(job_id: str) -> tuple[str, ...]:
        raise ValueError("the controller went away")

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            for fetch, said in ((fails, "j1: cannot read its log on h1: host h1 is unreachable"),
                                (bare, "j1: the controller went away")):
                dialog = JobLogDialog("j1", fetch)
                app.push_screen(dialog)
                await wait_for(pilot, lambda dialog=dialog: dialog.fetches >= 1)
                assert str(dialog.query_one("#log").render()) == said
                dialog.dismiss()
                await pilot.pause()

    run(scenario())
