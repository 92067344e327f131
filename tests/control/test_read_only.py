"""`heet-tui --read-only` with no controller running starts one that only watches.

Before, it started a full controller: with auto-approve remembered from an earlier
`heet-tui run --auto-approve`, a "read-only" TUI profiled the queued job and started it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import load_job_spec
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SetAutoApprove
from heet_tui.core.job import JobState


def test_a_read_only_controller_starts_profiles_and_applies_nothing(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")
    store.set_setting("auto_approve", "true")  # what `heet-tui run --auto-approve` leaves behind
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=50)), 0.0)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, read_only=True))
        await ctl.start()
        try:
            snap = await wait_for(ctl, lambda s: s.hosts and s.hosts[0].state.value == "ready", 30, "the host")
            await asyncio.sleep(3)  # rounds go by
            assert job(ctl.hub.latest, "a").state is JobState.QUEUED
            assert not snap.auto_approve
            with pytest.raises(ValueError, match="started read-only"):
                await ctl.post(SetAutoApprove(False))
        finally:
            await ctl.stop()
        kinds = {e.kind for e in store.events(job_id="a", limit=50)}
        assert not kinds & {"launch", "profile"}, kinds
        assert json.loads(store.setting("auto_approve")) is True, "the remembered setting is left alone"

    run_and_clean(scenario, tmp_path)


def test_the_read_only_tui_builds_its_controller_read_only(tmp_path: Path) -> None:
    import argparse

    from heet_tui.ui.backends import choose_backend

    hosts = write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)])
    for flag in (True, False):
        args = argparse.Namespace(hosts=str(hosts), state=str(tmp_path / "state"), demo=False, read_only=flag)
        controller = choose_backend(args).backend._factory()  # built on this thread, never started
        assert controller.opt.read_only is flag
        controller.store.close()


def test_plan_show_on_a_read_only_controller_offers_no_approve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It ended with "approve: heet-tui plan approve --id N", which the controller then refused."""
    from heet_tui.cli.main import main

    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "a", steps=50)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))  # planned unprofiled
    store.add_job(load_job_spec(spec), 0.0)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, read_only=True))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan to look at")
            capsys.readouterr()
            assert await asyncio.to_thread(main, ["plan", "show", "--state", str(store.dir)]) == 0
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    out = capsys.readouterr().out
    assert "the controller is read-only: it proposes plans to look at and applies none" in out, out
    assert "plan approve" not in out
