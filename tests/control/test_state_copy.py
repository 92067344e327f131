"""Two controllers on copies of one state directory (a backup restored beside the original,
``cp -r``): both name the same store, and each took every host from the other at every reconnect,
each counting the other's jobs lost."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from control_lab import run_and_clean, wait_for, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.host import HostState


def test_a_controller_on_a_copy_of_the_state_is_refused_and_takes_over_once_the_original_stops(
        tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    original = Store(tmp_path / "state")
    store_id = original.store_id
    original.close()
    shutil.copytree(tmp_path / "state", tmp_path / "state-copy")
    copy = Store(tmp_path / "state-copy")
    assert copy.store_id == store_id, "the copy names the same store"

    async def scenario() -> None:
        first = Controller(load_hosts(path), Store(tmp_path / "state"), ControllerOptions(interval_s=0.2))
        second = Controller(load_hosts(path), copy, ControllerOptions(interval_s=0.2))
        await first.start()
        try:
            await wait_for(first, lambda s: [h.state for h in s.hosts] == [HostState.READY], 30, "first ready")
            await second.start()
            snap = await wait_for(second, lambda s: s.hosts[0].state is HostState.AGENT_ERROR, 30,
                                  "the copy's controller refused")
            assert "another heet-tui controller of the same state store (a copy" in snap.hosts[0].message
            await asyncio.sleep(3.0)  # the second retries meanwhile; the first must not lose the host
            await first.publish()
            assert first.hub.latest.hosts[0].state is HostState.READY
            assert not any("lost" in e.message or "out" in e.kind for e in first.store.events(limit=100))
        finally:
            await first.stop()
        try:  # the original stopped: its agent saw the link close, and the copy's controller is not held up
            await wait_for(second, lambda s: s.hosts[0].state is HostState.READY, 60, "the copy's controller ready")
        finally:
            await second.stop()

    run_and_clean(scenario, tmp_path)
