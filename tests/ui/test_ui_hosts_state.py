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
