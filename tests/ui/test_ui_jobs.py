"""Jobs screen: sort and filter with the cursor kept on its job while rows update; cancel confirms."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import small_snapshot, with_job
from ui_support import SIZE, footer, four_jobs, run, wait_for

from heet_tui.core.intents import CancelJob
from heet_tui.core.job import JobState
from heet_tui.ui.dialogs.base import DialogBox
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.widgets.job_detail import JobDetail
from heet_tui.ui.widgets.job_table import JobTable
from heet_tui.ui.widgets.status_line import StatusLine


def order(table: JobTable) -> list[str]:
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def test_sort_keeps_cursor_on_the_selected_job_while_rows_update(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            assert order(table) == ["j1", "j2", "j3", "j4"]  # by state: running, queued, done
            table.select_key("j2")
            await pilot.press("s")  # next sort: progress, highest first
            await wait_for(pilot, lambda: order(table)[0] == "j4")
            assert table.selected_key == "j2"
            # j3 overtakes everybody while the user is looking at j2; the cursor stays on j2.
            backend.push(with_job(small_snapshot(1), "j3", progress=0.99))
            await wait_for(pilot, lambda: order(table)[:2] == ["j4", "j3"])
            assert table.selected_key == "j2"
            assert order(table).index("j2") == table.cursor_row
            assert "bert" in str(app.screen.query_one(JobDetail).render())

    run(scenario())


def test_filter_narrows_rows_and_escape_restores_them(make_app):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            await pilot.press("slash", *"a100")
            await wait_for(pilot, lambda: order(table) == ["j1"])
            await pilot.press("enter", "escape")
            await wait_for(pilot, lambda: table.row_count == 4)

    run(scenario())


def test_an_empty_jobs_screen_says_how_to_submit_and_an_empty_filter_says_why(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table, detail = await four_jobs(pilot, app), app.screen.query_one(JobDetail)
            await pilot.press("slash", *"zzz")
            await wait_for(pilot, lambda: 'No job matches "zzz" among the 4 listed' in str(detail.render()))
            assert "older" not in str(detail.render())
            # a long history: the older ended jobs are not in the snapshot, and a miss said "(560 hidden)"
            backend.push(replace(small_snapshot(2), hidden_ended=((JobState.DONE, 2441), (JobState.FAILED, 39))))
            await wait_for(pilot, lambda: "2480 older ended job(s) are not listed here: heet-tui jobs --all" in
                           str(detail.render()))
            await pilot.press("enter", "escape")
            await wait_for(pilot, lambda: table.row_count == 4)
            backend.push(replace(small_snapshot(2), jobs=()))
            await wait_for(pilot, lambda: "No jobs yet. Submit one with n (a job.toml" in str(detail.render()))

    run(scenario())


def test_cancel_asks_first_and_posts_only_on_yes(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j2")
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert "lost." in app.export_screenshot(), "the whole question shows, wrapped, not cut off"
            assert app.screen.question.startswith("Cancel job j2 (bert)? ")
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog))
            assert backend.posted == []
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("y")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [CancelJob("j2")]
            backend.push(with_job(small_snapshot(1), "j2", name="j2"))  # named as its id: said once
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert app.screen.question.startswith("Cancel job j2? ")
            await pilot.press("n")
            # j3 never ran: there is nothing to lose, and the question does not say there is
            table.select_key("j3")
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert app.screen.question == "Cancel job j3 (yolo)?"
            await pilot.press("n")
            # A finished job cannot be cancelled: the binding is not offered.
            table.select_key("j4")
            await pilot.pause()
            assert app.screen.check_action("cancel_job", ()) is False  # hidden, not merely dimmed

    run(scenario())


def test_stale_host_stays_listed_with_its_age(make_app):
    async def scenario():
        from heet_tui.ui.widgets.host_table import HostTable

        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            state = table.get_row("a100-2")[2].plain
            assert "unreachable" in state and "stale 1m00s" in state
            assert [j.state for j in app.latest.jobs][:1] == [JobState.RUNNING]

    run(scenario())


def test_status_line_counts_failed_and_cancelled_jobs_apart_from_done(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            line = app.screen.query_one(StatusLine)
            await wait_for(pilot, lambda: "1 done" in line.render().plain)
            assert "failed" not in line.render().plain
            snap = small_snapshot(1)
            backend.push(with_job(snap, "j3", state=JobState.FAILED))
            await wait_for(pilot, lambda: "1 failed" in line.render().plain)
            assert "0 wait · 1 done · 1 failed" in line.render().plain
            backend.push(with_job(snap, "j3", state=JobState.CANCELLED))  # cancelled: not done either
            await wait_for(pilot, lambda: "cancelled" in line.render().plain)
            assert "0 wait · 1 done · 1 cancelled" in line.render().plain
            # a job being profiled holds GPUs: it read as one waiting ("0 run · 1 wait")
            backend.push(with_job(snap, "j3", state=JobState.PROFILING))
            await wait_for(pilot, lambda: "profiling" in line.render().plain)
            assert "run · 1 profiling · 0 wait" in line.render().plain, line.render().plain

    run(scenario())


def test_u_gives_the_selected_job_its_changed_spec_from_the_file_it_was_submitted_from(make_app, backend):
    """The file comes with the job, not from its submit event: that one drops out of the
    snapshot's recent events on a busy cluster."""
    from heet_tui.core.intents import UpdateJobs
    from heet_tui.ui.dialogs.prompt import PromptDialog

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            backend.push(with_job(small_snapshot(1), "j1", spec_file="/lab/sweeps/j1.toml",
                                  events=("launch: j1 generation 1: 2xA100 on a",)))
            table = await four_jobs(pilot, app)
            table.select_key("j1")
            await wait_for(pilot, lambda: "u Update" in footer(app))
            await pilot.press("u")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
            await pilot.press("enter")
            await wait_for(pilot, lambda: backend.posted == [UpdateJobs("/lab/sweeps/j1.toml")])
            backend.push(with_job(small_snapshot(2), "j1", state=JobState.DONE))
            await wait_for(pilot, lambda: "u Update" not in footer(app))

    run(scenario())


def test_l_shows_the_selected_jobs_log_as_plain_text_and_r_reads_it_again(make_app, backend, monkeypatch):
    from heet_tui.ui.dialogs.job_log import JobLogDialog

    monkeypatch.setattr(JobLogDialog, "FOLLOW_S", 3600.0)  # reads by r only here (following: test_ui_job_log)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j2")
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, JobLogDialog) and app.screen.fetches == 1)
            shown = str(app.screen.query_one("#log").render())
            assert "epoch 1 [bold]" in shown, "not read as markup"
            # which run, rank and host, above the lines: scrolled to the end, the header was off screen
            assert app.screen.query_one(DialogBox).border_title == "j2 generation 3, rank 0 on h1, last 2 line(s)"
            await pilot.press("r")
            await wait_for(pilot, lambda: app.screen.fetches == 2)
            assert backend.logs_read == ["j2", "j2"]
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, JobLogDialog))

    run(scenario())


def test_the_details_say_how_long_a_restart_pauses_the_job_once_it_is_measured(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j2")
            detail = app.screen.query_one(JobDetail)
            await wait_for(pilot, lambda: "restarts" in str(detail.render()))
            assert "pauses it" not in str(detail.render()), "not measured yet: nothing claimed"
            backend.push(with_job(small_snapshot(1), "j2", restart_s=42.0))
            await wait_for(pilot, lambda: "(each pauses it ~42s)" in str(detail.render()))
            # ended, it pauses no more and plans no longer keep to its edit (kept for a retry)
            from heet_tui.core.sched_input import Constraints

            backend.push(with_job(small_snapshot(2), "j2", restart_s=42.0, state=JobState.CANCELLED, ended_at=99.0,
                                  edit=Constraints(pinned_type="T4")))
            await wait_for(pilot, lambda: "kept if it is retried; d drops it" in str(detail.render()))
            assert "pauses it" not in str(detail.render())

    run(scenario())


def test_the_reported_loss_is_a_column_to_sort_by_and_the_details_show_every_metric(make_app, backend):
    """A sweep is compared by its loss; the progress lines carried it and nothing showed it."""
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            assert [str(c) for c in table.get_row_at(1)][6] == "0.08714"
            while table.sort_name != "loss":
                await pilot.press("s")
            await wait_for(pilot, lambda: order(table) == ["j2", "j1", "j3", "j4"])  # lowest first, none last
            table.select_key("j2")
            detail = app.screen.query_one(JobDetail)
            await wait_for(pilot, lambda: "reported loss 0.08714  accuracy 0.9731" in str(detail.render()))

    run(scenario())


def test_the_status_line_counts_ended_jobs_the_snapshot_leaves_out(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            line = app.screen.query_one(StatusLine)
            await wait_for(pilot, lambda: "1 done" in line.render().plain)
            backend.push(replace(small_snapshot(1), hidden_ended=((JobState.DONE, 4000), (JobState.FAILED, 7))))
            await wait_for(pilot, lambda: "4001 done" in line.render().plain)
            assert "7 failed" in line.render().plain

    run(scenario())


def test_an_ended_job_says_how_long_it_took_instead_of_an_eta(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j4")
            detail = app.screen.query_one(JobDetail)
            await wait_for(pilot, lambda: "ETA -" in str(detail.render()))
            snap = small_snapshot(1)
            submitted = next(j.submitted_at for j in snap.jobs if j.id == "j4")
            backend.push(with_job(snap, "j4", ended_at=submitted + 754.0))
            await wait_for(pilot, lambda: "took 12m34s" in str(detail.render()))
            assert "ETA" not in str(detail.render())

    run(scenario())


def test_a_jobs_plan_screen_edit_is_shown_with_its_job_and_d_drops_it(make_app, backend):
    """An edit made with `e` on the Plan screen lasts; before, nothing showed it, and nothing
    could take it back once no plan including the job was pending."""
    from heet_tui.core.intents import DropEdit
    from heet_tui.core.sched_input import Constraints

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            backend.push(with_job(small_snapshot(1), "j2", edit=Constraints(pinned_type="T4", fixed_count=2)))
            table.select_key("j1")
            await pilot.press("d")
            assert not any(isinstance(i, DropEdit) for i in backend.posted), "j1 has no edit"
            assert "d Drop edit" not in footer(app)
            table.select_key("j2")
            detail = app.screen.query_one(JobDetail)
            await wait_for(pilot, lambda: "your edit: T4 only, 2 GPU(s)" in str(detail.render()))
            await wait_for(pilot, lambda: "d Drop edit" in footer(app))
            await pilot.press("d")
            await wait_for(pilot, lambda: DropEdit("j2") in backend.posted)

    run(scenario())


def test_quitting_the_tuis_own_controller_says_which_jobs_train_on():
    from heet_tui.ui.app import left_running

    own = small_snapshot(1)  # a controller's snapshot: j1 and j2 run, j3 waits
    assert left_running(own) == ("2 job(s) still train on their hosts (j1, j2), unwatched: heet-tui or heet-tui run "
                                 "watches them again, from where they are; 1 queued job(s) wait until it runs")
    queued_only = replace(own, jobs=tuple(j for j in own.jobs if j.id in ("j3", "j4")))  # they sat idle, unsaid
    assert left_running(queued_only) == "1 queued job(s) wait until heet-tui or heet-tui run runs again"
    assert left_running(replace(own, mode="demo")) == "", "a simulation ends with the TUI"
    assert left_running(replace(own, jobs=())) == "" and left_running(None) == ""


def test_at_80_columns_the_status_line_keeps_auto_approve_whatever_the_counts(make_app, backend):
    """With a failed and a cancelled job and a plan pending, the line ended "plan #20" or
    "plan #14 (2)  auto": auto-approve's state was cut off, or read as on."""
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(80, 24)) as pilot:
            line = app.screen.query_one(StatusLine)
            snap = with_job(with_job(small_snapshot(1), "j3", state=JobState.FAILED), "j4", state=JobState.CANCELLED)
            backend.push(replace(snap, plan_id=12345))
            await wait_for(pilot, lambda: "failed" in line.render().plain)
            plain = line.render().plain
            assert len(plain.split("\n")[0]) <= line.content_size.width, f"cut off on screen: {plain!r}"
            assert plain.rstrip().endswith("auto off") and "1 failed" in plain and "#12345" in plain, plain

    run(scenario())


def test_the_demo_says_its_clock_waits_while_a_plan_is_pending(make_app, backend):
    """The demo's clock stood still for a pending plan with nothing on screen to say why."""
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(80, 24)) as pilot:
            line = app.screen.query_one(StatusLine)
            backend.push(replace(small_snapshot(1), mode="demo", plan_id=7))
            await wait_for(pilot, lambda: "demo" in line.render().plain)
            assert "⏸ paused" in line.render().plain, "shorter at 80 columns"
            assert len(line.render().plain.split("\n")[0]) <= line.content_size.width
            await pilot.resize_terminal(160, 30)
            await wait_for(pilot, lambda: "⏸ clock waits for the plan" in line.render().plain)
            backend.push(replace(small_snapshot(2), mode="demo", plan=None, plan_id=None))
            await wait_for(pilot, lambda: "⏸" not in line.render().plain)

    run(scenario())




def test_at_60_columns_the_status_line_still_says_auto_off_and_read_only(make_app, backend):
    """At 60 columns even the shortest line wrapped under the one-line header: it ended "auto",
    which read as auto-approve on, and READ-ONLY was gone."""
    async def scenario():
        app = make_app("jobs", read_only=True)
        async with app.run_test(size=(60, 20)) as pilot:
            line = app.screen.query_one(StatusLine)
            snap = with_job(small_snapshot(1), "j3", state=JobState.FAILED)
            backend.push(replace(snap, plan_id=12345))
            await wait_for(pilot, lambda: "failed" in line.render().plain)
            plain = line.render().plain
            assert len(plain.split("\n")[0]) <= line.content_size.width, f"cut off on screen: {plain!r}"
            assert plain.rstrip().endswith("auto off  READ-ONLY") and "1 failed" in plain, plain
            await pilot.resize_terminal(40, 20)
            await wait_for(pilot, lambda: line.render().plain.startswith("…"))
            assert len(line.render().plain.split("\n")[0]) <= line.content_size.width
            assert line.render().plain.endswith("auto off  READ-ONLY"), "what must stay is at the end: cut at the start"

    run(scenario())
