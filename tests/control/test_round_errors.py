"""A round that raises is said in the snapshot's notices, once, with where the traceback is."""

from __future__ import annotations

from pathlib import Path

import pytest
from control_lab import run_and_clean, wait_for, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control import controller as controller_module
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store


def test_a_failing_round_is_a_notice_once_and_its_end_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the traceback went to controller.log alone: under the TUI the last good snapshot
    stayed on screen, and nothing said that planning had stopped."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    failing = {"on": True, "calls": 0}

    def explain_waiting(ctl, now) -> None:
        failing["calls"] += 1
        if failing["on"]:
            raise RuntimeError("unforeseen state")

    monkeypatch.setattr(controller_module, "explain_waiting", explain_waiting)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.1, profile=False))
        await ctl.start()
        try:
            said = "a controller round failed (RuntimeError: unforeseen state); the traceback is in "
            snap = await wait_for(ctl, lambda s: any(n.startswith(said) for n in s.notices), 30, "the notice")
            calls = failing["calls"]
            await wait_for(ctl, lambda s: failing["calls"] >= calls + 3, 30, "more failing rounds")
            assert sum(n.startswith(said) for n in ctl.notices) == 1, "said once, however many rounds fail"
            assert str(tmp_path / "state" / "controller.log") in snap.notices[-1]
            failing["on"] = False
            await wait_for(ctl, lambda s: any("controller rounds work again" in n for n in s.notices), 30,
                           "the all-clear")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    log = (tmp_path / "state" / "controller.log").read_text()
    assert log.count("RuntimeError: unforeseen state") == 2, "the traceback once, and the all-clear naming it"
    assert "controller rounds work again after " in log
