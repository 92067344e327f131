"""Plan screen: approve, reject, tweak with a live prediction, auto-approve."""

from __future__ import annotations

from textual.widgets import Input, Label, Static
from ui_fakes import small_snapshot, with_job
from ui_support import SIZE, open_tweak, run, wait_for

from heet_tui.core.intents import ApprovePlan, EditJob, RejectPlan, Replan, SetAutoApprove
from heet_tui.ui.dialogs.tweak import TweakDialog
from heet_tui.ui.widgets.plan_table import PlanTable, summary


def test_plan_rows_show_diff_and_prediction(make_app):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(PlanTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            assert [table.get_row_at(i)[0] for i in range(3)] == ["j3", "j1", "j2"]  # start, grow, then keep
            j1 = table.get_row("j1")
            assert j1[1].plain == "grow" and j1[2] == "2xA100 @a100-1" and j1[3] == "4xA100 @a100-1"
            assert j1[5] == "+93%" and j1[7] == "50s"
            assert (j1[4], table.get_row("j3")[4]) == ("410/s → 790/s ±12%", "- → 180/s ±?"), "how sure each is"
            said = str(app.screen.query_one("#plan-summary", Static).render())
            assert "50m00s" in said and "±? on j3: a rough guess" in said

    run(scenario())


def test_approve_posts_the_pending_plan_and_clears_it(make_app, backend):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("a")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [ApprovePlan(7)]
            table = app.screen.query_one(PlanTable)
            # the plan's lines go; the allocation that stands stays: j1 and j2 kept, j3 not started
            await wait_for(pilot, lambda: app.latest.plan is None and table.row_count == 3)
            assert [table.get_row_at(i)[0] for i in range(3)] == ["j1", "j2", "j3"]
            assert [table.get_row_at(i)[1].plain for i in range(3)] == ["keep", "keep", "wait"]
            # With nothing pending, approving again is not offered.
            assert app.screen.check_action("approve", ()) is False  # hidden, not merely dimmed
            await pilot.press("a")
            await pilot.pause()
            assert backend.posted == [ApprovePlan(7)]

    run(scenario())


def test_reject_posts_reject_then_p_asks_to_plan_again(make_app, backend):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("r")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [RejectPlan(7)]
            backend.push(small_snapshot(1, plan=False))  # j3 still waits, and no plan comes back
            summary = app.screen.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: "p plans again" in str(summary.render()))
            await pilot.press("p")
            await wait_for(pilot, lambda: len(backend.posted) == 2)
            assert backend.posted[1] == Replan()

    run(scenario())


def test_tweak_re_predicts_while_editing_and_applies_the_edit(make_app, backend):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            dialog = await open_tweak(pilot, app)
            count = dialog.query_one("#count", Input)
            count.focus()
            await pilot.press("3")
            await wait_for(pilot, lambda: dialog.previews >= 2 and backend.previews[-1].constraints.fixed_count == 3)
            text = str(dialog.query_one("#prediction", Static).render())
            assert "790/s as proposed, 600/s with this tweak" in text and "+46%" in text  # fake: 200 x 3, vs 410 now
            # Left empty, the policy decides: not shown as invalid (it turned red when tabbed past)
            await pilot.press("backspace")
            count.validate(count.value)
            assert count.value == "" and count.is_valid and not count.has_class("-invalid")
            await pilot.press("3")
            # A count outside the job's range is refused in the form, before any prediction.
            await pilot.press("backspace", "9")
            await wait_for(pilot, lambda: "from 1 to 4" in str(dialog.query_one("#error", Static).render()))
            # (under load the empty field between the two keys may be predicted too: "the policy decides")
            assert 9 not in {p.constraints.fixed_count for p in backend.previews}, "refused before any prediction"
            await pilot.press("backspace", "4")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: any(isinstance(i, EditJob) for i in backend.posted))
            edit = backend.posted[-1]
            assert edit.job_id == "j1" and edit.plan_id == 7 and edit.constraints.fixed_count == 4

    run(scenario())


def test_auto_approve_toggle(make_app, backend):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("t")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [SetAutoApprove(True)]

    run(scenario())


def test_a_preview_made_later_is_compared_on_the_proposed_plans_clock():
    """JCTs count age: a preview a minute after the proposal must not read a minute worse."""
    from heet_tui.core.plan import PredictedEffect
    from heet_tui.ui.dialogs.tweak import describe_effect, same_clock_avg_jct

    proposed = PredictedEffect((), avg_jct_s=600.0, avg_jct_before_s=700.0, at=1000.0)
    same_plan_later = PredictedEffect((), avg_jct_s=660.0, avg_jct_before_s=760.0, at=1060.0)
    better_later = PredictedEffect((), avg_jct_s=630.0, avg_jct_before_s=760.0, at=1060.0)
    assert same_clock_avg_jct(same_plan_later, proposed) == 600.0
    assert same_clock_avg_jct(better_later, proposed) == 570.0
    assert same_clock_avg_jct(PredictedEffect((), avg_jct_s=5.0), proposed) == 5.0, "nothing to shift by"
    # Pinning a waiting job to a slow type changes the current state's JCT too (it would start
    # there); that is the tweak's doing, not the clock's. Shifting by it read 4m20s, better.
    pinned_slow = PredictedEffect((), avg_jct_s=720.0, avg_jct_before_s=960.0, at=1060.0)
    assert same_clock_avg_jct(pinned_slow, proposed) == 660.0
    assert "10m00s as proposed → 9m30s with this tweak" in describe_effect(better_later, "j1", proposed)


def test_a_tweak_that_holds_a_job_says_the_average_leaves_it_out():
    """Holding a running job showed "5m02s as proposed → 55s with this tweak": the held job had
    simply dropped out of the average, unsaid."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect
    from heet_tui.ui.dialogs.tweak import describe_effect

    proposed = PredictedEffect((JobPrediction("long", 900.0, 900.0, 600.0, 0.0),
                                JobPrediction("short", 900.0, 900.0, 60.0, 0.0)), avg_jct_s=330.0, at=0.0)
    held = PredictedEffect((JobPrediction("long", 900.0, 0.0, None, 0.0),
                            JobPrediction("short", 900.0, 900.0, 60.0, 0.0)), avg_jct_s=60.0, at=0.0)
    text = describe_effect(held, "long", proposed)
    assert "5m30s as proposed → 1m00s with this tweak, without long (no GPUs, so no completion to count)" in text
    assert "without" not in describe_effect(proposed, "long", proposed)


def test_on_an_80_column_terminal_the_whole_plan_summary_shows(make_app):
    # A fixed 3-line summary cut off its last words at 80 columns.
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=(80, 24)) as pilot:
            widget = app.screen.query_one("#plan-summary", Static)
            await wait_for(pilot, lambda: "50m00s" in str(widget.render()))
            await pilot.pause()
            text = summary(app.latest)
            assert "queue for GPUs in order" in text.plain
            needed = len(text.wrap(app.console, widget.content_size.width))
            assert needed >= 3, "the case this test is about: the summary wraps"
            assert widget.content_size.height >= needed

    run(scenario())


def test_a_plan_predicted_worse_than_none_says_so_in_words() -> None:
    """Seen: "1m54s with this plan, 1m50s without it", in red only, and approved unnoticed."""
    from dataclasses import replace

    snap = small_snapshot()
    worse = replace(snap, plan=replace(snap.plan, effect=replace(snap.plan.effect, avg_jct_s=3700.0)))
    said = summary(worse).plain
    assert "1h00m without it (waiting jobs then queue for GPUs in order): worse by this average" in said, said
    assert said.count("worse") == 1 and "decides by (r rejects it)" in said, said
    assert "worse" not in summary(snap).plain, "the fake plan gains 10 minutes"
    slightly = replace(snap, plan=replace(snap.plan, effect=replace(snap.plan.effect, avg_jct_s=3640.0)))
    assert "worse by this average" in summary(slightly).plain, "1% worse is said too (3.6% went by in red only)"


def test_a_plan_that_sets_a_running_job_back_says_so_with_or_without_an_average() -> None:
    """A migrate from 160/s to 80/s (2h41m for 1h20m) said nothing where the plan had no average
    JCT (a job in it had no prediction yet)."""
    from dataclasses import replace

    from heet_tui.cli.commands.plan_json import plan_obj
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    snap = small_snapshot()
    slowed = JobPrediction("j1", 160.0, 80.0, 9660.0, 60.0)
    plan = replace(snap.plan, effect=PredictedEffect((slowed,)))
    said = summary(replace(snap, plan=plan)).plain
    assert "predicted average JCT" not in said and "it delays j1 by 1h21m: done in 2h41m, not 1h20m" in said, said
    assert plan_obj(plan, 3, "heet", "proposed", snap=snap)["most_delayed"] == {
        "job": "j1", "delay_s": 4860.0, "done_in_without_s": 4800.0, "done_in_s": 9660.0}


def test_while_a_plan_is_applied_the_summary_says_so() -> None:
    """Its jobs read as "waiting with nothing proposed (left out by the policy, or in a plan you
    rejected ...)" while the plan just approved was stopping and starting them."""
    from dataclasses import replace

    snap = replace(small_snapshot(plan=False), applying_plan=8)
    text = summary(snap).plain
    assert text.startswith("Applying plan #8: jobs stop, save a checkpoint and start again") and "rejected" not in text
    assert summary(replace(snap, applying_plan=None)).plain.startswith("No plan pending")


def test_with_no_plan_the_summary_says_why_each_waiting_job_waits() -> None:
    """It blamed "a rejected plan" while the only waiting job was being profiled."""
    from dataclasses import replace

    from heet_tui.core.job import CANNOT_START, PROFILE_WAITING, TWIN_WAITING, JobState
    from heet_tui.core.sched_input import Constraints

    snap = small_snapshot(plan=False)
    jobs = {j.id: j for j in snap.jobs}
    jobs["j3"] = replace(jobs["j3"], state=JobState.PROFILING)
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: being profiled, planned once measured." in text and "rejected" not in text
    jobs["j3"] = replace(jobs["j3"], state=JobState.QUEUED, message=CANNOT_START + "no ready host has H100 GPUs")
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: cannot start on the hosts as they are" in text and "rejected" not in text
    jobs["j3"] = replace(jobs["j3"], message=TWIN_WAITING.format("j1"))  # a twin, profiled through j1
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: being profiled, planned once measured." in text and "rejected" not in text
    # no GPU idle to profile it on: "being profiled" was said while nothing measured it
    jobs["j3"] = replace(jobs["j3"], message=PROFILE_WAITING + "no T4 GPU is idle")
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: waiting to be profiled until a GPU it may use is idle (the Jobs screen says which), planned once " \
           "measured." in text and "being profiled," not in text and "rejected" not in text
    # just measured: it read "left out by the policy, or in a plan you rejected" with nothing rejected
    jobs["j3"] = replace(jobs["j3"], message="profiled; waiting for a plan")
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: measured, planned in the next round." in text and "rejected" not in text
    jobs["j3"] = replace(jobs["j3"], message="waiting for GPUs: it needs 5 GPUs of one type, and only 4xT4 are free")
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: waiting for GPUs others hold (the Jobs screen says which, and when)." in text
    jobs["j3"] = replace(jobs["j3"], message="left queued: the heet plan gives the free 4xT4 GPUs to no job")
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain
    assert "j3: waiting with nothing proposed" in text and "p plans again" in text
    jobs["j3"] = replace(jobs["j3"], message="left queued: held by hand", edit=Constraints(held=True))
    text = summary(replace(snap, jobs=tuple(jobs.values()))).plain  # it said "p plans again", which cannot help
    assert "j3: kept out by your edit (see the Jobs screen; d there drops it)." in text and "p plans" not in text
    jobs["j3"] = replace(jobs["j3"], message="profiled; waiting for a plan", edit=Constraints())
    full = tuple(replace(h, gpu_jobs=tuple((g.index, "jx") for g in h.gpus)) for h in snap.hosts)
    text = summary(replace(snap, jobs=tuple(jobs.values()), hosts=full)).plain
    assert "j3: waiting for GPUs (all 8 are in use); planned as jobs end." in text, "a100-2 is down: 8, not 12"
    assert "j4" not in text, "a done job waits for nothing"


def test_at_80_columns_the_status_line_keeps_the_counts_the_plan_and_auto_approve(make_app):
    from heet_tui.ui.widgets.status_line import StatusLine

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=(80, 24)) as pilot:
            line = app.screen.query_one(StatusLine)
            await wait_for(pilot, lambda: "auto off" in line.render().plain)
            plain = line.render().plain
            assert "1 wait · 1 done" in plain and "plan #7 (2)" in plain and len(plain) <= 80
        wide = make_app("plan")
        async with wide.run_test(size=(160, 24)) as pilot:  # wide: every word
            line = wide.screen.query_one(StatusLine)
            await wait_for(pilot, lambda: "policy heet" in line.render().plain)
            assert "plan #7 pending (2)" in line.render().plain

    run(scenario())


def test_with_no_plan_the_table_shows_the_allocation_that_stands() -> None:
    """It was empty under "the current allocation stands"."""
    from heet_tui.ui.widgets.plan_table import current_rows, plan_cells

    rows = current_rows(small_snapshot(plan=False))
    assert list(rows) == ["j1", "j2", "j3"], "running jobs, then the queued one (to tweak it onto GPUs by hand)"
    cells = plan_cells(rows["j1"])
    assert cells[1].plain == "keep" and cells[2] == cells[3] == "2xA100 @a100-1"
    assert cells[4] == "410/s → 410/s" and cells[7] == "-", "measured speed, no pause"
    assert plan_cells(rows["j3"])[1].plain == "wait"


def test_a_job_the_plan_leaves_waiting_has_a_row_with_its_predicted_start() -> None:
    """A plan that held a job back for faster GPUs showed nothing of it; the row says when and
    where the plan predicts it starts, and the summary counts it among the held."""
    from dataclasses import replace

    from heet_tui.core.job import HELD_FOR_FASTER
    from heet_tui.core.plan import JobPrediction
    from heet_tui.ui.widgets.plan_table import plan_cells, plan_rows

    snap = small_snapshot()
    effect = replace(snap.plan.effect, jobs=(*snap.plan.effect.jobs,
                                             JobPrediction("j9", 0.0, 0.0, 130.0, 0.0, 40.0, "A100")))
    rows = plan_rows(replace(snap.plan, effect=effect))
    assert list(rows)[-1] == "j9" and rows["j9"].waiting
    cells = plan_cells(rows["j9"])
    assert cells[1].plain == "wait" and cells[2] == "-" and cells[3] == "→ A100 in 40s" and cells[6] == "2m10s"
    jobs = tuple(replace(j, message=HELD_FOR_FASTER + "the plan waits for A100 GPUs") if j.id == "j3" else j
                 for j in small_snapshot(plan=False).jobs)
    text = summary(replace(small_snapshot(plan=False), jobs=jobs)).plain
    assert "j3: held for faster GPUs that free soon (see the Jobs screen)." in text


def test_a_waiting_row_can_be_tweaked(make_app, backend):
    """e on a job the plan leaves waiting opens the tweak dialog with no GPUs proposed (to pin
    it to the free type, say)."""
    from dataclasses import replace

    from heet_tui.core.plan import JobPrediction

    snap = small_snapshot()
    plan = snap.plan
    effect = replace(plan.effect, jobs=tuple(p for p in plan.effect.jobs if p.job_id != "j3")
                     + (JobPrediction("j3", 0.0, 0.0, 130.0, 0.0, 40.0, "A100"),))
    waiting = replace(plan, allocations={j: a for j, a in plan.allocations.items() if j != "j3"},
                      changes=tuple(c for c in plan.changes if c.job_id != "j3"), effect=effect)

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(PlanTable)
            backend.push(replace(snap, plan=waiting))
            await wait_for(pilot, lambda: table.row_count == 3 and table.get_row("j3")[1].plain == "wait")
            table.select_key("j3")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, TweakDialog))
            titles = [str(label.render()) for label in app.screen.query(Label)]
            assert "proposed: no GPUs" in titles, titles

    run(scenario())


def test_a_job_with_an_edit_is_marked_and_its_tweak_starts_from_the_edit(make_app, backend):
    """Before, a second `e` showed "any type" and "policy decides" for a job pinned to T4 x2."""
    from textual.widgets import Select

    from heet_tui.core.sched_input import Constraints

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(PlanTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            assert table.get_row("j1")[0] == "j1"
            backend.push(with_job(small_snapshot(0), "j1", edit=Constraints(pinned_type="A100", fixed_count=4)))
            await wait_for(pilot, lambda: table.get_row("j1")[0] == "j1 ✎")
            assert table.get_row("j2")[0] == "j2"
            dialog = await open_tweak(pilot, app)
            assert dialog.query_one("#type", Select).value == "A100"
            assert dialog.query_one("#count", Input).value == "4"

    run(scenario())


def test_a_plan_auto_approve_holds_says_so_in_place_of_plans_apply_without_asking():
    from dataclasses import replace

    snap = replace(small_snapshot(), auto_approve=True)
    assert "auto-approve ON: plans apply without asking" in summary(snap).plain
    held = summary(replace(snap, held_why="the same plan failed at 10:31:40 (its steps say why)")).plain
    assert "auto-approve ON, but this plan waits for you: the same plan failed at 10:31:40" in held
    assert "without asking" not in held


def test_a_job_across_hosts_takes_one_host_name_and_a_count_in_the_plan_table():
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import ChangeKind
    from heet_tui.ui.widgets.plan_table import PlanRow, plan_cells

    across = Allocation.of("j", "RTX2080Ti", {"node-007-rtx2080ti": [0], "node-015-rtx2080ti": [1]})
    cells = plan_cells(PlanRow("j", ChangeKind.START, None, across, None))
    assert cells[3] == "2xRTX2080Ti @node-007-rtx2080ti +1"


def test_a_start_without_its_checkpoint_is_said_before_the_approval() -> None:
    """A job whose checkpoint was on a re-keyed host was started elsewhere from step 0 by the
    approved plan; only then did it say "about 15,780 steps are trained again"."""
    snap = small_snapshot()  # its plan starts j3
    assert "without its checkpoint" not in summary(snap).plain
    away = with_job(snap, "j3", checkpoint_away="c (host-key-changed)")
    said = summary(away).plain
    assert "starts without its checkpoint: j3 (its checkpoint is on c (host-key-changed))" in said, said
    assert "without its checkpoint" not in summary(with_job(snap, "j1", checkpoint_away="c (unreachable)")).plain, \
        "j1 runs on; the plan grows it where it is"
