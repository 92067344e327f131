"""Plan screen: a and r decide the plan the screen shows, and not one that replaced it a moment ago."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.core.intents import ApprovePlan, RejectPlan
from heet_tui.ui.screens import plan as plan_screen
from heet_tui.ui.widgets.plan_table import PlanTable


async def _told(pilot, app, plan_id: int) -> str:
    """The notification that names plan ``plan_id``, once it is up."""
    await wait_for(pilot, lambda: any(f"#{plan_id}" in n.message for n in app._notifications))
    return next(n.message for n in app._notifications if f"#{plan_id}" in n.message)


async def _seven_gone_then_nine(pilot, backend, said: Static, now: list[float], gone_s: float) -> None:
    """Plan #7 leaves (applied elsewhere), ``gone_s`` pass with none, then #9 comes."""
    backend.push(replace(small_snapshot(1, plan=False)))
    await wait_for(pilot, lambda: str(said.render()).startswith("No plan pending"))
    now[0] += gone_s
    backend.push(replace(small_snapshot(2), plan_id=9))
    await wait_for(pilot, lambda: str(said.render()).startswith("Plan #9"))


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
            told = await _told(pilot, app, 8)
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
            await _seven_gone_then_nine(pilot, backend, said, now, 0.0)
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


def test_a_plan_after_a_long_while_with_none_has_only_just_appeared_and_replaced_nothing(make_app, backend):
    """Plan #7 applied a minute ago, then #9 came: r was refused with "plan #9 has just replaced
    #7", of a plan long gone. The guard stays; the words say what happened."""
    now = [1000.0]

    async def scenario():
        app = make_app("plan")
        app.clock = lambda: now[0]
        async with app.run_test(size=SIZE) as pilot:
            said = app.screen.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: str(said.render()).startswith("Plan #7"))
            now[0] += 5.0
            await _seven_gone_then_nine(pilot, backend, said, now, 60.0)  # #7 applied a minute before #9
            now[0] += plan_screen.JUST_REPLACED_S / 4
            await pilot.press("r")
            told = await _told(pilot, app, 9)
            assert "plan #9 has only just appeared here: nothing done; look at it, then press r again" in told, told
            assert "replaced" not in told, told
            await pilot.pause()
            assert backend.posted == []
            now[0] += plan_screen.JUST_REPLACED_S
            await pilot.press("r")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [RejectPlan(9)]

    run(scenario())


def test_a_plan_that_came_while_another_screen_was_shown_has_only_just_appeared_here(make_app, backend):
    """Away on the Jobs screen while #7 gave way to #8 a minute earlier, the user came back: a was
    refused with "plan #8 has just replaced #7", though nothing had just happened."""
    now = [1000.0]

    async def scenario():
        app = make_app("plan")
        app.clock = lambda: now[0]
        async with app.run_test(size=SIZE) as pilot:
            plan = app.screen
            said = plan.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: str(said.render()).startswith("Plan #7"))
            await pilot.press("2")
            await wait_for(pilot, lambda: app.screen is not plan)
            now[0] += 1.0
            backend.push(replace(small_snapshot(1), plan_id=8))
            await wait_for(pilot, lambda: app.latest.plan_id == 8)
            now[0] += 60.0
            await pilot.press("3")
            await wait_for(pilot, lambda: app.screen is plan and str(said.render()).startswith("Plan #8"))
            await pilot.press("a")
            told = await _told(pilot, app, 8)
            assert "plan #8 has only just appeared here: nothing done; look at it, then press a again" in told, told
            await pilot.pause()
            assert backend.posted == []

    run(scenario())
