"""Cluster screen: a drained host says why it takes no work."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.ui.widgets.host_detail import HostDetail
from heet_tui.ui.widgets.host_table import HostTable
from heet_tui.ui.widgets.status_line import StatusLine


async def _select(pilot, app, name: str) -> HostTable:
    """The Cluster screen's table, its three hosts listed and ``name`` selected."""
    table = app.screen.query_one(HostTable)
    await wait_for(pilot, lambda: table.row_count == 3)
    table.select_key(name)
    return table


def test_a_drained_hosts_details_say_why_it_was_drained(make_app, backend):
    """Drained as broken by the controller, a host said so only in a notice gone in six seconds."""
    why = "t4-1 drained as broken: runs of a, b died there before their first progress report"

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await _select(pilot, app, "t4-1")
            detail = app.screen.query_one(HostDetail).query_one("#host-info", Static)
            await wait_for(pilot, lambda: "t4-1" in str(detail.render()))
            assert "drained" not in str(detail.render())
            snap = small_snapshot(1)
            hosts = tuple(replace(h, drained=True, drained_why=why) if h.name == "t4-1" else h for h in snap.hosts)
            backend.push(replace(snap, hosts=hosts))
            await wait_for(pilot, lambda: why in str(detail.render()))
            assert "drained: no new work is placed here" in str(detail.render())

    run(scenario())


def test_a_gpu_someone_else_computes_on_is_marked_and_named(make_app, backend):
    """Plans keep off such a GPU; a free-looking GPU that no plan uses needs saying why."""
    from heet_tui.ui.format import job_shape
    from heet_tui.ui.widgets.host_table import gpu_cells

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            snap = small_snapshot(1)
            hosts = tuple(replace(h, gpus=tuple(replace(g, others=("pid 4242 python (alice)",)) if g.index == 3 else g
                                                for g in h.gpus)) if h.name == "t4-1" else h for h in snap.hosts)
            backend.push(replace(snap, hosts=hosts))
            table.select_key("t4-1")
            detail = app.screen.query_one(HostDetail).query_one("#host-info", Static)
            await wait_for(pilot, lambda: "t4-1" in str(detail.render()) and "outside" in str(detail.render()))
            shown = str(detail.render())
            assert "gpu3 T4         in use outside heet: pid 4242 python (alice)" in shown, shown
            assert "gpu2 T4         free" in shown
            (job,) = {j for _, j in hosts[2].gpu_jobs}
            assert gpu_cells(hosts[2]).plain == f"{job_shape(job)}▢▢▨"
            line = app.screen.query_one(StatusLine)
            await wait_for(pilot, lambda: "GPUs 3/12 +1 outside " in line.render().plain)

    run(scenario())


def test_d_says_undrain_on_a_drained_host_and_undrains_it(make_app, backend):
    """The footer said "d Drain" on a host already drained, where d undrains it."""
    from ui_support import footer

    from heet_tui.core.intents import DrainHost

    snap = small_snapshot()
    backend.current = replace(snap, hosts=tuple(replace(h, drained=h.name == "t4-1") for h in snap.hosts))

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            table = await _select(pilot, app, "t4-1")
            await wait_for(pilot, lambda: "d Undrain" in footer(app))
            assert "d Drain" not in footer(app)
            await pilot.press("d")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [DrainHost("t4-1", False)]
            table.select_key(next(h.name for h in snap.hosts if h.name != "t4-1"))
            await wait_for(pilot, lambda: "d Drain" in footer(app) and "d Undrain" not in footer(app))

    run(scenario())


def test_slash_filters_the_hosts_and_escape_brings_them_all_back(make_app):
    """At 80 hosts the Cluster screen showed 25; finding one meant scrolling."""
    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            await pilot.press("slash", "t", "4")
            await wait_for(pilot, lambda: table.row_count == 1)
            assert table.get_row_at(0)[0] == "t4-1"
            await pilot.press("ctrl+a", "ctrl+k", *"j1")  # by a job on it: the A100 host running j1
            await wait_for(pilot, lambda: table.row_count == 1 and table.get_row_at(0)[0] == "a100-1")
            await pilot.press("enter", "escape")
            await wait_for(pilot, lambda: table.row_count == 3)

    run(scenario())


def test_no_color_draws_every_screen(make_app, backend, monkeypatch):
    """NO_COLOR=1 (Textual's monochrome filter) crashed as soon as the Cluster table drew: its
    rows were padded with no style, which the filter cannot take."""
    monkeypatch.setenv("NO_COLOR", "1")
    from dataclasses import replace

    from ui_fakes import small_snapshot

    from heet_tui.core.snapshot import JobProfile, ProfileCell

    # two jobs' profiles: the Profiles screen's row off the cursor had plain cells, drawn with no style,
    # and crashed the TUI (one job's was the cursor row alone)
    snap = small_snapshot()
    backend.current = replace(snap, profiles=snap.profiles + (JobProfile("j2", (ProfileCell("T4", "1", 95.0, True),)),))

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await _select(pilot, app, "t4-1")
            for key in "23451":
                await pilot.press(key)
                await pilot.pause()
            assert app.return_code is None, "still running"

    run(scenario())


def test_two_jobs_on_one_host_are_told_apart_without_colour() -> None:
    """aws-0 ran yolov3-9 on one GPU and imagenet-10 on three: "■■■■" in two oranges, and four
    identical greys under NO_COLOR."""
    from heet_tui.core.gpu import Gpu
    from heet_tui.core.host import HostState
    from heet_tui.core.snapshot import HostStatus
    from heet_tui.ui.widgets.host_table import gpu_cells

    gpus = tuple(Gpu(i, "T4") for i in range(6))
    jobs = ((0, "yolov3-9"), (1, "imagenet-10"), (2, "imagenet-10"), (3, "imagenet-10"), (5, "bert-2"))
    host = HostStatus("aws-0", HostState.READY, gpus=gpus, gpu_jobs=jobs)
    cells = gpu_cells(host).plain
    assert cells[4] == "▢" and cells[1] == cells[2] == cells[3]
    assert len({cells[0], cells[1], cells[5]}) == 3, cells
    # a job's shape stays when another leaves, and is its own on every host (not its order there)
    alone = HostStatus("aws-1", HostState.READY, gpus=gpus, gpu_jobs=jobs[1:4])
    assert gpu_cells(alone).plain[1:4] == cells[1:4]
    # 40 jobs two by two on one host: never one shape for both
    for i in range(40):
        pair = HostStatus("h", HostState.READY, gpus=gpus[:2], gpu_jobs=((0, f"job-{i}"), (1, f"job-{i + 1}")))
        first, second = gpu_cells(pair).plain
        assert first != second, (i, first, second)


def test_a_host_with_more_gpus_than_the_pane_has_lines_shows_every_gpu_or_says_how_many_are_not(make_app, backend):
    """At 80x24 an 8-GPU host's pane listed gpu0 to gpu4, then the sparklines: gpu5-7 and their
    jobs were missing without a word."""
    from ui_fakes import host

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            snap = small_snapshot(1)
            big = host("dgx-0", "A100", 8, {0: "deepspeech2-7", 1: "deepspeech2-7", 2: "deepspeech2-7",
                                            3: "imagenet-1", 4: "imagenet-1", 7: "bert-2"})
            backend.push(replace(snap, hosts=(*snap.hosts, big)))
            await wait_for(pilot, lambda: table.row_count == 4)
            table.select_key("dgx-0")
            detail = app.screen.query_one(HostDetail).query_one("#host-info", Static)
            await wait_for(pilot, lambda: "dgx-0" in str(detail.render()))
            await pilot.pause()
            shown = str(detail.render())
            assert len(shown.split("\n")) <= detail.size.height, (shown, detail.size)
            said = "deepspeech2-7" in shown and "imagenet-1" in shown and ("bert-2" in shown or "more GPU(s)" in shown)
            assert said, shown
            assert "gpu0-2   A100" in shown, shown
            await pilot.resize_terminal(80, 14)  # no line left for any GPU: said on the first line
            await wait_for(pilot, lambda: str(detail.render()).startswith(
                "dgx-0  (8 GPU(s) not shown: a taller terminal shows them)"))
            long = tuple(replace(h, message="ready; " + "x" * 150) if h.name == "dgx-0" else h
                         for h in (*snap.hosts, big))  # wraps: counted as drawn, it hid the list and the count
            backend.push(replace(snap, hosts=long))
            await pilot.resize_terminal(80, 17)
            await wait_for(pilot, lambda: "x" * 20 in str(detail.render()))
            from rich.text import Text

            rendered = str(detail.render())
            drawn = len(Text(rendered).wrap(app.console, detail.size.width))
            assert drawn <= detail.size.height or rendered.startswith("dgx-0  (8 GPU(s) not shown"), (drawn, rendered)
            await pilot.resize_terminal(160, 60)  # laid out again, one line per GPU, without another selection
            await wait_for(pilot, lambda: "gpu7 A100" in str(detail.render()) and "gpu5 A100" in str(detail.render()))

    run(scenario())


def test_d_asks_before_draining_a_host_jobs_run_on_and_names_them(make_app, backend):
    """One d on a host with 8 jobs drained it unasked; with auto-approve on, all 8 restarted."""
    from heet_tui.core.intents import DrainHost
    from heet_tui.ui.dialogs.confirm import ConfirmDialog

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await _select(pilot, app, "a100-1")  # j1 runs there
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            assert "Drain a100-1?" in app.screen.question and "the 1 running on it (j1) stops at the next plan you " \
                "approve, to start again where a plan finds room" in app.screen.question
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog))
            assert backend.posted == [], "no: nothing drained"
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("y")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [DrainHost("a100-1", True)]
            await _select(pilot, app, "a100-2")  # nothing runs there: drained at once, as before
            await pilot.press("d")
            await wait_for(pilot, lambda: len(backend.posted) == 2)
            assert backend.posted[1] == DrainHost("a100-2", True) and not isinstance(app.screen, ConfirmDialog)

    run(scenario())
