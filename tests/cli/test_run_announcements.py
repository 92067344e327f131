"""What ``heet-tui run`` prints of plans: headless, its lines are all a user sees of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from heet_tui.cli.commands import run as run_command
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import Plan


@dataclass
class Watched:
    store: Store
    pending_plan_id: int | None = None
    auto_approve: bool = False
    held_why: str | None = None


def test_a_plan_announced_as_waiting_then_withdrawn_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    """Seen: "plan #7 proposed ... heet-tui plan approve --id 7", then `plan approve --id 7` said
    "not pending", and nothing had said it was gone."""
    monkeypatch.setattr(run_command, "SETTLE_S", 0.0)
    store = Store(tmp_path / "state")
    plan = Plan.build({}, {"a": Allocation.of("a", "T4", {"h": [0]})}, "heet", 0.0)
    ctl = Watched(store, store.add_plan(plan))
    seen = run_command._proposed(ctl, (ctl.pending_plan_id, 0.0, False))
    seen = run_command._proposed(ctl, seen)
    assert f"plan #{ctl.pending_plan_id} proposed" in capsys.readouterr().out
    store.set_plan_status(ctl.pending_plan_id, "superseded", 1.0)
    withdrawn, ctl.pending_plan_id = ctl.pending_plan_id, None
    run_command._proposed(ctl, seen)
    out = capsys.readouterr().out
    assert f"plan #{withdrawn} withdrawn: what it was made from changed" in out and "nothing is proposed now" in out


@pytest.mark.parametrize("status", ["approved", "rejected"])
def test_a_plan_that_went_by_approval_or_rejection_is_not_called_withdrawn(tmp_path: Path, monkeypatch, capsys,
                                                                          status: str) -> None:
    monkeypatch.setattr(run_command, "SETTLE_S", 0.0)
    store = Store(tmp_path / "state")
    ctl = Watched(store, store.add_plan(Plan.build({}, {"a": Allocation.of("a", "T4", {"h": [0]})}, "heet", 0.0)))
    seen = run_command._proposed(ctl, run_command._proposed(ctl, (ctl.pending_plan_id, 0.0, False)))
    store.set_plan_status(ctl.pending_plan_id, status, 1.0)
    ctl.pending_plan_id = None
    capsys.readouterr()
    run_command._proposed(ctl, seen)
    assert "withdrawn" not in capsys.readouterr().out


def test_an_event_line_names_its_job(tmp_path: Path) -> None:
    """Two jobs failing in one second printed "failed  rank 0 on hostA ended with exit code 2"
    twice, with no job named."""
    store = Store(tmp_path / "state")
    store.add_event(1.0, "failed", "rank 0 on hostA ended with exit code 2\nTraceback ...", "s-rel", "hostA")
    store.add_event(2.0, "stopped", "stopped s-rel generation 3: resize", "s-rel")
    store.add_event(3.0, "host", "hostA is ready")
    failed, stopped, host = sorted(store.events(limit=10), key=lambda e: e.at)
    assert run_command.event_line(failed) == "s-rel: rank 0 on hostA ended with exit code 2"
    assert run_command.event_line(stopped) == "stopped s-rel generation 3: resize", "named already"
    assert run_command.event_line(host) == "hostA is ready"
    store.add_event(4.0, "failed", "rank 0 on loc-a ended with exit code 5", "loc", "loc-a")
    (inside,) = [e for e in store.events(limit=10) if e.at == 4.0]
    assert run_command.event_line(inside) == "loc: rank 0 on loc-a ended with exit code 5", "loc-a does not name loc"
    # the failure's hint was in `jobs NAME` only
    store.add_event(5.0, "failed", "rank 0 on h ended with exit code 1\nModuleNotFoundError: No module named 'x'\n"
                    "hint: no module x: install it on the host", "crash", "h")
    (hinted,) = [e for e in store.events(limit=10) if e.at == 5.0]
    assert run_command.event_line(hinted) == ("crash: rank 0 on h ended with exit code 1 (hint: no module x: install it "
                                              "on the host; heet-tui jobs crash has more)")


def test_host_grace_is_remembered_for_every_controller_of_the_store(tmp_path: Path, monkeypatch, capsys) -> None:
    """A 90 s outage on a flaky link stopped healthy jobs (60 s grace, not to be changed); set on
    `run`, it held for that run only, and the TUI's controller used 60 s."""
    from heet_tui.cli.main import main
    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller

    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[[hosts]]\nname = "h"\ntransport = "local"\nemulate = { gpu_type = "T4", count = 1, speed = 1.0 }\n')

    async def fake_run(hosts_file, store, options, until_idle, why=""):
        return 0

    monkeypatch.setattr(run_command, "_run", fake_run)
    state = ["--state", str(tmp_path / "state"), "--hosts", str(hosts)]
    store = Store(tmp_path / "state")
    assert Controller(load_hosts(hosts), store).opt.host_loss_grace_s == 60.0, "never set: 60 s"
    assert main(["run", *state, "--host-grace", "600"]) == 0
    assert main(["run", *state]) == 0, "a later run without it"
    assert Controller(load_hosts(hosts), Store(tmp_path / "state")).opt.host_loss_grace_s == 600.0
    assert main(["run", *state, "--host-grace", "0"]) == 2
    assert "--host-grace must be > 0, got 0" in capsys.readouterr().err
