"""Snapshot bursts collapse into the newest one; a big cluster stays listed in full."""

from __future__ import annotations

from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.bench.synthetic_snapshot import SyntheticCluster
from heet_tui.ui.messages import SnapshotArrived
from heet_tui.ui.widgets.host_table import HostTable
from heet_tui.ui.widgets.job_table import JobTable


def test_a_burst_of_snapshots_is_coalesced_into_the_latest(make_app):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            seen = app.snapshots_seen
            burst = [small_snapshot(step) for step in range(1, 31)]
            for snap in burst:
                app.post_message(SnapshotArrived(snap))
            await wait_for(pilot, lambda: app.latest is burst[-1])
            assert app.snapshots_seen - seen < len(burst)
            table = app.screen.query_one(JobTable)
            assert "55%" in table.get_row("j1")[3]  # progress of the last snapshot: 0.25 + 30 x 0.01

    run(scenario())


def test_large_cluster_lists_every_host_and_job(make_app):
    big = SyntheticCluster(256, 2000).snapshot(3)

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            app.post_message(SnapshotArrived(big))
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 256)
            unreachable = [h.name for h in big.hosts if h.state.value == "unreachable"]
            assert unreachable and all("stale" in table.get_row(n)[2].plain for n in unreachable)
            app.switch_mode("jobs")
            await pilot.pause()
            jobs = app.screen.query_one(JobTable)
            await wait_for(pilot, lambda: jobs.row_count == 2000)
            await pilot.press("end")
            assert jobs.cursor_row == 1999

    run(scenario())


def test_a_host_never_reached_is_grouped_by_its_declared_type() -> None:
    """An unreachable host that declares emulated T4s was grouped under "?", apart from the T4s."""
    from dataclasses import replace

    from heet_tui.core.host import HostState
    from heet_tui.ui.widgets.host_table import host_row

    down = replace(small_snapshot().hosts[1], gpus=(), state=HostState.UNREACHABLE, declared_type="A100")
    assert host_row(down, 100.0, "type")[1] == "A100"
    assert host_row(replace(down, declared_type=""), 100.0, "type")[1] == "?"
    # and its GPU type column shows that type, dim, where it said "-"
    assert str(host_row(down, 100.0, "rack")[3]) == "A100"
    assert host_row(replace(down, declared_type=""), 100.0, "rack")[3] == "-"


def test_notices_are_shown_once_each_by_count_and_an_attached_tui_gets_only_the_latest(repo):
    """Read by text, a notice said again later (the hosts file failing once more) was never shown
    again, and a TUI attaching to a controller that had run for hours toasted twenty at once."""
    from dataclasses import replace

    from ui_fakes import FakeBackend

    from heet_tui.ui.app import FIRST_NOTICES, HeetApp

    old = tuple(f"plan #{i}: 1 step(s) done, 0 failed" for i in range(11, 31))
    backend = FakeBackend(replace(small_snapshot(), notices=old, notices_total=30))

    def toasts(app) -> list[str]:
        return [n.message for n in app._notifications]

    async def scenario():
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            assert toasts(app) == list(old[-FIRST_NOTICES:])
            again = old[1:] + ("plan #12: 1 step(s) done, 0 failed",)  # the same text, said anew
            backend.push(replace(small_snapshot(1), notices=again, notices_total=31))
            await wait_for(pilot, lambda: len(toasts(app)) == FIRST_NOTICES + 1)
            assert toasts(app)[-1] == "plan #12: 1 step(s) done, 0 failed"
            backend.push(replace(small_snapshot(2), notices=again, notices_total=31))  # nothing new
            await wait_for(pilot, lambda: app.latest is not None and app.latest.now == 102.0)
            assert len(toasts(app)) == FIRST_NOTICES + 1

    run(scenario())


def test_a_tui_attaching_later_does_not_toast_old_news_as_new(repo):
    """A second TUI showed "hosts file reloaded: added h2-5" and "... removed h2-5", a minute old."""
    import time
    from dataclasses import replace

    from ui_fakes import FakeBackend

    from heet_tui.ui.app import HeetApp

    snap = small_snapshot()
    notices = ("hosts file reloaded: added h2-5", "hosts file reloaded: removed h2-5", "plan #3 auto-approved")
    backend = FakeBackend(replace(snap, notices=notices, notices_total=3,
                                  notices_at=(time.time() - 70.0, time.time() - 65.0, time.time() - 3.0)))

    async def scenario():
        app = HeetApp(backend, repo / "configs" / "local.toml", start_mode="jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.pause()
            assert [n.message for n in app._notifications] == ["plan #3 auto-approved"]

    run(scenario())
