"""Plan screen: a and r decide the plan the screen shows, and not one that replaced it a moment ago."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.core.intents import ApprovePlan, RejectPlan
from heet_tui.ui.screens import plan as plan_screen
from heet_tui.ui.widgets.plan_table import PlanTable


def test_a_plan_that_just_replaced_the_one_shown_is_not_approved_until_a_is_pressed_again(make_app, backend):
    """With a new proposal every few seconds on a big cluster, a approved whichever plan came
    last: one that had replaced the plan on screen just before the key, unread."""
    now = [1000.0]

    async def scenario():
        app = make_app("plan")
        app.clock = lambda: now[0]
        async with app.run_test(size=SIZE) as pilot:
            said = app.screen.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: app.screen.query_one(PlanTable).row_count == 3)
            now[0] += 30.0  # plan #7 read at leisure; then #8 comes
            backend.push(replace(small_snapshot(1), plan_id=8))
            await wait_for(pilot, lambda: str(said.render()).startswith("Plan #8"))
            now[0] += plan_screen.JUST_REPLACED_S / 4
            await pilot.press("a")
            await wait_for(pilot, lambda: any("#8" in n.message for n in app._notifications))
            told = next(n.message for n in app._notifications if "#8" in n.message)
            assert "plan #8 has just replaced #7" in told and "press a again" in told, told
            await pilot.pause()
            assert backend.posted == [], "nothing approved on a key meant for another plan"
            now[0] += plan_screen.JUST_REPLACED_S
            await pilot.press("a")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [ApprovePlan(8)]

    run(scenario())


def test_r_too_leaves_a_plan_that_just_replaced_the_one_shown_and_the_window_is_a_setting(make_app, backend,
                                                                                        monkeypatch):
    """Rejecting an unread plan costs as much: nothing is proposed again until something changes."""
    monkeypatch.setattr(plan_screen, "JUST_REPLACED_S", 10.0)
    now = [1000.0]

    async def scenario():
        app = make_app("plan")
        app.clock = lambda: now[0]
        async with app.run_test(size=SIZE) as pilot:
            said = app.screen.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: str(said.render()).startswith("Plan #7"))
            backend.push(replace(small_snapshot(1, plan=False)))  # #7 goes (applied elsewhere), then #9 comes
            await wait_for(pilot, lambda: str(said.render()).startswith("No plan pending"))
            backend.push(replace(small_snapshot(2), plan_id=9))
            await wait_for(pilot, lambda: str(said.render()).startswith("Plan #9"))
            now[0] += 5.0
            await pilot.press("r")
            await wait_for(pilot, lambda: any("plan #9 has just replaced #7" in n.message for n in app._notifications))
            await pilot.pause()
            assert backend.posted == []
            now[0] += 5.0
            await pilot.press("r")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [RejectPlan(9)]

    run(scenario())
