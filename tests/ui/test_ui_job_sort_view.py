"""Jobs screen: a re-sort or a narrowed filter keeps the selected job's row on screen."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import job, small_snapshot
from ui_support import run, wait_for

from heet_tui.core.job import JobState
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.widgets.job_detail import JobDetail
from heet_tui.ui.widgets.job_table import JobTable

WIDE = (160, 45)


def many_jobs(count: int = 80) -> Snapshot:
    """``count`` queued jobs, each sort putting them in another order: by submission job00 first,
    by progress job79 first, by throughput scattered."""
    jobs = tuple(job(f"job{i:02d}", f"sweep-{i:02d}", JobState.QUEUED, None, i / count, float((i * 37) % count),
                     float(i)) for i in range(count))
    return replace(small_snapshot(plan=False), jobs=jobs)


def rows_on_screen(table: JobTable) -> list[str]:
    """The job ids on the lines the table draws now (what the user sees, header left out)."""
    lines = [table.render_line(y).text for y in range(1, table.scrollable_content_region.height)]
    return [line.split()[0] for line in lines if line.strip()]


def test_a_new_sort_order_scrolls_the_selected_jobs_row_into_view(make_app, backend):
    """With 80 jobs, the 15th selected and s pressed, the details stayed on it while the table
    stayed at the top, its row far below."""
    backend.current = many_jobs()

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=WIDE) as pilot:
            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 80)
            await pilot.press("home", *["down"] * 14)
            await wait_for(pilot, lambda: table.selected_key == "job14")
            for _ in range(3):  # progress (job14 ends up 66th), throughput, eta
                await pilot.press("s")
                await pilot.pause()
                assert table.selected_key == "job14"
                assert "job14" in rows_on_screen(table), (table.sort_name, table.cursor_row, table.scroll_offset)
            assert "sweep-14" in str(app.screen.query_one(JobDetail).render())

    run(scenario())


def test_a_snapshot_that_moves_the_selected_job_far_keeps_its_row_in_view(make_app, backend):
    """Sorted by progress, the job looked at overtook the others: the cursor went with it, the
    view did not."""
    backend.current = many_jobs()

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=WIDE) as pilot:
            table = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: table.row_count == 80)
            await pilot.press("s")  # progress, highest first: job79 at the top
            await pilot.press("home", *["down"] * 3)
            await wait_for(pilot, lambda: table.selected_key == "job76")
            snap = many_jobs()
            backend.push(replace(snap, jobs=tuple(replace(j, progress=0.0) if j.id == "job76" else j
                                                  for j in snap.jobs)))
            await wait_for(pilot, lambda: table.cursor_row == 79)
            await pilot.pause()
            assert table.selected_key == "job76" and "job76" in rows_on_screen(table)

    run(scenario())
