"""`heet-tui hosts remove` of a busy host while no controller runs: the next controller keeps it.

Before, the next controller did not know the host: it held the job's run there, neither stopped
nor moved, until the host was put back in the file (tests/control/test_unlisted_host.py is that
case still, for a file edited by hand)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, running_past, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.kept_hosts import KEPT_SETTING
from heet_tui.control.store import Store
from heet_tui.core.job import JobState

OPTIONS = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False, execution=ExecOptions(stop_grace_s=5.0))


def test_a_busy_host_removed_with_no_controller_has_its_job_moved_off_by_the_next_one(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_local_hosts(tmp_path, [("h1", "T4", 1, 1.0), ("h2", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=10)

    async def scenario() -> None:
        first = Controller(load_hosts(path), store, OPTIONS)
        await first.start()
        try:
            host = await running_past(first, spec, "a", 12, 60)
        finally:
            await first.stop()  # a trains on
        other = "h2" if host == "h1" else "h1"
        assert await asyncio.to_thread(main, ["hosts", "remove", host, "--hosts", str(path),
                                              "--state", str(store.dir)]) == 0
        assert "the next one keeps the host, drained" in capsys.readouterr().out
        again = Controller(load_hosts(path), store, OPTIONS)
        await again.start()
        try:
            assert not any("not in the hosts file" in n for n in again.notices), list(again.notices)
            snap = await wait_for(again, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").allocation
                                  is not None and job(s, "a").allocation.host_names == (other,), 90,
                                  f"a moved off {host} to {other}")
            launch = [e.message for e in store.events("a", limit=100) if e.kind == "launch"][-1]
            assert "generation 2" in launch, launch
            stopped_at = store.job("a").job.steps_done
            await wait_for(again, lambda s: store.job("a").job.steps_done > stopped_at, 60, "a trains on at its new host")
            said = [e.message for e in store.events("a", limit=100)]
            assert not [m for m in said if "behind" in m or "again" in m], said  # resumed from its checkpoint
            await wait_for(again, lambda s: host not in [h.name for h in s.hosts], 30, f"{host} dropped")
            assert not store.setting(KEPT_SETTING)
            assert job(snap, "a").state is JobState.RUNNING
        finally:
            await again.stop()

    run_and_clean(scenario, tmp_path)
