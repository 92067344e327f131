"""Jobs screen rows: ids cut to fit, a host out said in the row, the job just submitted selected."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ui_fakes import small_snapshot
from ui_support import SIZE, four_jobs, run, wait_for

from heet_tui.core.job import JobState
from heet_tui.ui.widgets.job_table import JobTable


def test_a_long_job_id_is_cut_in_the_middle_in_the_table_only() -> None:
    """A 45-character id pushed every other column off an 80-column screen."""
    from heet_tui.ui.format import ID_WIDTH
    from heet_tui.ui.widgets.job_table import job_row, matches

    long_id = "resnet50-imagenet-lr0.1-wd5e-4-seed1234-long"
    job = replace(small_snapshot().jobs[0], id=long_id, name=long_id)
    shown = job_row(job)[0].plain
    assert len(shown) == ID_WIDTH and shown == "resnet50-…-seed1234-long"
    assert matches(job, "wd5e-4"), "the filter still sees the whole id"
    assert job_row(small_snapshot().jobs[0])[0].plain == "j1"


def test_a_running_job_whose_host_is_out_says_so_in_its_row() -> None:
    """Its row said "running 39%" for over a minute; only the detail pane named the host out."""
    from heet_tui.ui.widgets.job_table import job_row

    running = next(j for j in small_snapshot().jobs if j.state is JobState.RUNNING)
    assert job_row(running)[1].plain == "running"
    out = replace(running, message="its host a100-1 is out (unreachable: timed out); it keeps its GPUs for 40 s more")
    assert job_row(out)[1].plain == "host out"


def test_a_wide_screen_shows_a_long_job_id_whole(make_app, backend):
    """At 160 columns a sweep's ids were cut to 24 characters: sweep-lr0…seed1-steps150 stood for
    six learning rates, with 35 columns unused."""
    long_id = "sweep-lr0.003-wd0.0001-seed1-steps150"

    async def scenario(size: tuple[int, int]) -> str:
        app = make_app("jobs")
        async with app.run_test(size=size) as pilot:
            snap = small_snapshot()
            backend.push(replace(snap, jobs=(replace(snap.jobs[0], id=long_id, name=long_id), *snap.jobs[1:])))
            table = app.screen.query_one(JobTable)

            def shown() -> str | None:
                names = [table.get_row_at(i)[0].plain for i in range(table.row_count)]
                return next((n for n in names if n.endswith("steps150")), None)

            await wait_for(pilot, lambda: shown() is not None)
            return shown()

    assert asyncio.run(scenario((170, 45))) == long_id
    assert asyncio.run(scenario((100, 30))) == "sweep-lr0…seed1-steps150", "cut where the screen is narrow"


def test_a_job_submitted_from_the_tui_is_selected_once_listed(make_app, backend, monkeypatch):
    """After n, the new job came in at the top and the details pane stayed on the job selected before."""
    from heet_tui.core.intents import SubmitJob

    async def post(intent):
        backend.posted.append(intent)
        return "submitted fresh"

    monkeypatch.setattr(backend, "post", post)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = await four_jobs(pilot, app)
            table.select_key("j2")
            app.post_intent(SubmitJob("/w/fresh.toml"), "submit fresh.toml")
            await wait_for(pilot, lambda: app.select_next == "fresh")
            snap = small_snapshot(2)
            fresh = replace(snap.jobs[-1], id="fresh", name="fresh")
            backend.push(replace(snap, jobs=(*snap.jobs, fresh)))
            await wait_for(pilot, lambda: table.selected_key == "fresh")
            assert app.select_next is None, "selected once: the user's own moves after it are theirs"

    run(scenario())


def test_filtering_by_a_gpu_type_finds_the_queued_jobs_limited_to_it(make_app, backend):
    """t4 listed only the jobs running on T4 hosts: a queued job whose spec allows T4 alone, the one
    about to start there, was missed."""
    from heet_tui.ui.widgets.job_table import matches

    snap = small_snapshot()
    t4_allowed = replace(next(j for j in snap.jobs if j.id == "j3"), gpu_types=("A100", "T4"))
    a100_only = replace(t4_allowed, id="j5", name="vit", gpu_types=("A100",))
    assert matches(t4_allowed, "t4") and matches(t4_allowed, "yolo T4") and not matches(a100_only, "t4")
    backend.current = replace(snap, jobs=(*(t4_allowed if j.id == "j3" else j for j in snap.jobs), a100_only))

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 5)
            await pilot.press("slash", *"t4")
            await wait_for(pilot, lambda: table.row_count < 5)
            assert sorted(table.get_row_at(i)[0].plain for i in range(table.row_count)) == ["j2", "j3"]

    run(scenario())
