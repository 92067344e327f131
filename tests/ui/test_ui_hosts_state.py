"""The Hosts screen says how each entry's host is doing, beside what the file says of it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hosts_support import hosts_copy
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.core.host import HostState


@pytest.mark.parametrize(("change", "shown"), [
    # a host added with a wrong port showed nothing wrong here; only the Cluster screen's pane said so
    ({"state": HostState.UNREACHABLE, "message": "connection refused"}, "unreachable"),
    # `hosts drain la2`: status and the Cluster screen said drained, this screen plain "ready"
    ({"drained": True}, "ready (drained)"),
])
def test_the_hosts_screen_says_how_a_host_is_doing_as_the_cluster_screen_does(make_app, backend, tmp_path, change,
                                                                               shown):
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            snap = small_snapshot(1)
            backend.push(snap)
            await wait_for(pilot, lambda: screen.table.row_count == 2 and str(screen.table.get_row("t4-1")[1]) == "ready")
            hosts = tuple(replace(h, **change) if h.name == "t4-1" else h for h in snap.hosts)
            backend.push(replace(small_snapshot(2), hosts=hosts))
            await wait_for(pilot, lambda: str(screen.table.get_row("t4-1")[1]) == shown)
            assert str(screen.table.get_row("a100-1")[1]) == "ready"

    run(scenario())


def test_the_selected_hosts_trouble_is_said_where_the_host_is_fixed(make_app, backend, tmp_path):
    """The Hosts screen showed "agent-error" and nothing more; why was on the Cluster screen only."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            snap = small_snapshot(1)
            why = "cannot deploy the agent to /w (SFTP and cat both failed): Operation not permitted"
            hosts = tuple(replace(h, state=HostState.AGENT_ERROR, message=why) if h.name == "t4-1" else h
                          for h in snap.hosts)
            backend.push(replace(snap, hosts=hosts))
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            said = screen.query_one("#host-why")
            screen.table.select_key("a100-1")
            await wait_for(pilot, lambda: str(said.render()) == "")
            screen.table.select_key("t4-1")
            await wait_for(pilot, lambda: str(said.render()) == f"t4-1: agent-error: {why}")

    run(scenario())


def test_a_row_cut_at_the_screens_edge_ends_in_an_ellipsis(make_app, backend, tmp_path):
    """At 80 columns "8xRTX2080Ti emulated, speed 0.4" read "... speed 0", cut at the edge."""
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "rtx-3"\naddress = "10.0.0.3"\n'
                    'emulate = { gpu_type = "RTX2080Ti", count = 8, speed = 0.4 }\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.table.row_count == 1)
            await pilot.pause()
            row = "".join(segment.text for segment in screen.table.render_line(1))
            assert len(row) == screen.table.scrollable_content_region.width and row.endswith("…"), row
            assert "speed 0 " not in row + " ", row
            screen.table.scroll_to(x=screen.table.max_scroll_x, animate=False, immediate=True)
            await pilot.pause()
            row = "".join(segment.text for segment in screen.table.render_line(1))
            assert not row.endswith("…"), "scrolled to the end, nothing more lies to the right"
            assert row.startswith("rtx-3 ") and "  …" in row, "the name stays; the columns after it lie to the left"
            header = "".join(segment.text for segment in screen.table.render_line(0))
            assert header.startswith("Name ") and "  …" in header, header

    run(scenario())
