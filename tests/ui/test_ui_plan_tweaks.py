"""Plan screen tweaks: the types a spec allows, a plan that changes under the dialog, and a job
left waiting with no plan pending."""

from __future__ import annotations

from textual.widgets import Input, Static
from ui_fakes import small_snapshot, with_job
from ui_support import SIZE, open_tweak, run, wait_for

from heet_tui.core.intents import EditJob
from heet_tui.ui.dialogs.tweak import TweakDialog
from heet_tui.ui.widgets.plan_table import PlanTable


def test_the_tweak_offers_only_the_gpu_types_the_jobs_spec_allows(make_app, backend):
    """Seen: a job whose spec says T4 only was offered (and put on) the A100s."""
    from textual.widgets import Select

    backend.current = with_job(small_snapshot(), "j1", gpu_types=("a100",))  # specs match types ignoring case

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            dialog = await open_tweak(pilot, app)
            offered = [value for _, value in dialog.query_one("#type", Select)._options if isinstance(value, str)]
            assert offered == ["A100"], offered

    run(scenario())


def test_the_tweak_dialog_follows_a_plan_that_changes_under_it(make_app, backend):
    """Seen: opened on plan #5, the dialog still compared with #5's 36 s when #7 stood at 1m04s."""
    from dataclasses import replace

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            dialog = await open_tweak(pilot, app)
            snap = small_snapshot(1)
            slower = replace(snap.plan.effect, avg_jct_s=3840.0)
            newer = replace(snap, plan_id=8, plan=replace(snap.plan, effect=slower))
            backend.push(newer)
            note = dialog.query_one("#plan-note", Static)
            await wait_for(pilot, lambda: "plan #7 was replaced by #8" in str(note.render()))
            prediction = dialog.query_one("#prediction", Static)
            await wait_for(pilot, lambda: "plan average JCT 1h04m as proposed" in str(prediction.render()))
            assert dialog.plan_id == 8 and dialog.edit().plan_id == 8
            backend.push(small_snapshot(2, plan=False))
            await wait_for(pilot, lambda: "plan #8 is no longer pending" in str(note.render()))
            assert "Apply proposes a new plan with this edit" in str(note.render()) and dialog.edit().plan_id == 0

    run(scenario())


def test_with_no_plan_pending_a_waiting_job_can_be_tweaked_into_one(make_app, backend):
    """A job held for faster GPUs had no row and no key with no plan pending: it could not be
    started by hand on the free GPUs."""
    from heet_tui.ui.dialogs.tweak import NO_PLAN

    backend.current = small_snapshot(plan=False)

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(PlanTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            table.select_key("j3")
            await pilot.pause()
            assert app.screen.check_action("tweak", ()) and not app.screen.check_action("approve", ())
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, TweakDialog))
            dialog = app.screen
            assert "no plan is pending: Apply proposes one" in str(dialog.query_one("#plan-note", Static).render())
            dialog.query_one("#count", Input).value = "1"
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: any(isinstance(i, EditJob) for i in backend.posted))
            edit = backend.posted[-1]
            assert (edit.plan_id, edit.job_id, edit.constraints.fixed_count) == (NO_PLAN, "j3", 1)

    run(scenario())


def test_apply_keeps_the_dialog_open_while_its_preview_is_refused(make_app, backend, monkeypatch):
    """ctrl+s closed it on an edit the controller had just refused ("2 GPU(s) cannot be given"): the
    form was lost and the same refusal came back as a toast."""
    refusing = type(backend).preview

    async def preview(self, edit):
        if edit.constraints.fixed_count == 4:
            raise ValueError("4 GPU(s) cannot be given: a100-1 has at most 4 GPU(s) of one type")
        return await refusing(self, edit)

    monkeypatch.setattr(type(backend), "preview", preview)

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            dialog = await open_tweak(pilot, app)
            dialog.query_one("#count", Input).value = "4"
            error = dialog.query_one("#error", Static)
            await wait_for(pilot, lambda: "cannot be given" in str(error.render()))
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is dialog and not any(isinstance(i, EditJob) for i in backend.posted)
            dialog.query_one("#count", Input).value = "2"
            await wait_for(pilot, lambda: "cannot be given" not in str(error.render()))
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is not dialog)
            posted = len(backend.posted)
            # applied before its preview came back: it closed on the refused edit all the same
            dialog = await open_tweak(pilot, app)
            dialog.query_one("#count", Input).value = "4"
            await pilot.press("ctrl+s")
            error = dialog.query_one("#error", Static)
            await wait_for(pilot, lambda: "cannot be given" in str(error.render()))
            assert app.screen is dialog and not any(isinstance(i, EditJob) for i in backend.posted[posted:])
            dialog.query_one("#count", Input).value = "1"
            await pilot.press("ctrl+s")  # an edit it accepts: applied once its preview is in
            await wait_for(pilot, lambda: app.screen is not dialog)

    run(scenario())
