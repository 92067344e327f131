"""The Hosts screen says how each entry's host is doing, beside what the file says of it."""

from __future__ import annotations

from dataclasses import replace

from hosts_support import hosts_copy
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.core.host import HostState


def test_a_host_that_cannot_be_reached_says_so_on_the_hosts_screen(make_app, backend, tmp_path):
    """A host added with a wrong port showed nothing wrong here; only the Cluster screen's detail
    pane said "connection refused"."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            snap = small_snapshot(1)
            backend.push(snap)
            await wait_for(pilot, lambda: screen.table.row_count == 2 and str(screen.table.get_row("t4-1")[1]) == "ready")
            down = tuple(replace(h, state=HostState.UNREACHABLE, message="connection refused") if h.name == "t4-1"
                         else h for h in snap.hosts)
            backend.push(replace(small_snapshot(2), hosts=down))
            await wait_for(pilot, lambda: str(screen.table.get_row("t4-1")[1]) == "unreachable")
            assert str(screen.table.get_row("a100-1")[1]) == "ready"

    run(scenario())


def test_a_drained_host_says_so_on_the_hosts_screen_as_on_the_cluster_screen(make_app, backend, tmp_path):
    """`hosts drain la2`: status and the Cluster screen said drained, the Hosts screen plain "ready"."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            snap = small_snapshot(1)
            drained = tuple(replace(h, drained=True) if h.name == "t4-1" else h for h in snap.hosts)
            backend.push(replace(snap, hosts=drained))
            await wait_for(pilot, lambda: screen.table.row_count == 2
                           and str(screen.table.get_row("t4-1")[1]) == "ready (drained)")
            assert str(screen.table.get_row("a100-1")[1]) == "ready"

    run(scenario())
