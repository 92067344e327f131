"""The Jobs screen's keys follow the selected job: cancel while it lives, retry once it failed or
was cancelled, none of them in the demo."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import small_snapshot, with_job
from ui_support import SIZE, footer, four_jobs, run, wait_for

from heet_tui.core.intents import RetryJob
from heet_tui.core.job import JobState


def test_the_selected_jobs_keys_follow_its_state_cancel_while_it_lives_retry_once_it_failed(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j1")
            await wait_for(pilot, lambda: "x Cancel" in footer(app))
            assert "r Retry" not in footer(app), "running: nothing to retry"
            await pilot.press("r")
            assert not any(isinstance(i, RetryJob) for i in backend.posted)
            # said, not silent: retrying down a list, the rows re-sort and r lands on a running job
            await wait_for(pilot, lambda: any("j1 is running: r retries a failed or cancelled job" in n.message
                                              for n in app._notifications))
            backend.push(with_job(small_snapshot(1), "j1", state=JobState.FAILED))
            await wait_for(pilot, lambda: "r Retry" in footer(app))
            assert "x Cancel" not in footer(app) and table.selected_key == "j1"
            await pilot.press("r")
            await wait_for(pilot, lambda: RetryJob("j1") in backend.posted)
            backend.push(with_job(small_snapshot(2), "j1", state=JobState.DONE, progress=1.0))
            await wait_for(pilot, lambda: "r Retry" not in footer(app))
            assert "x Cancel" not in footer(app), "done: neither"
            # done by its script's exit 0 short of its target: retried, it goes on from its checkpoint
            backend.push(with_job(small_snapshot(3), "j1", state=JobState.DONE, progress=0.08))
            await wait_for(pilot, lambda: "r Retry" in footer(app))

    run(scenario())


def test_the_demo_offers_no_retry_or_update_and_says_why_when_pressed(make_app, backend):
    """The demo's footer offered r Retry and u Update, then refused them as "the demo cannot do RetryJob"."""
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            backend.push(replace(with_job(small_snapshot(1), "j1", state=JobState.CANCELLED), mode="demo"))
            table.select_key("j1")
            await wait_for(pilot, lambda: "l Log" in footer(app) and app.screen.latest.mode == "demo")
            assert "r Retry" not in footer(app) and "u Update" not in footer(app), footer(app)
            await pilot.press("r")
            await wait_for(pilot, lambda: any("the demo's jobs are simulated" in n.message for n in app._notifications))
            assert not any(isinstance(i, RetryJob) for i in backend.posted)

    run(scenario())
