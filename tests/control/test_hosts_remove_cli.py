"""`heet-tui hosts remove NAME` says which jobs run on the host and what comes of them.

Seen: on a host running jobs it printed only `removed host "c" from ...`, where the TUI's remove
says "It runs t4-only-3: drained first, it moves off at the next plan you approve".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from control_lab import (
    job,
    run_and_clean,
    running_past,
    started_controller,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SetAutoApprove


def _with_a_running(tmp_path: Path, names: tuple[str, ...],
                    then: Callable[[Controller, Path, list[str], str], Awaitable[None]]) -> None:
    """Job ``a`` running on one of the 1-T4 hosts ``names`` under auto-approve, then ``then`` with the
    controller, the hosts file, the CLI's location options and the host ``a`` runs on."""
    path = write_local_hosts(tmp_path, [(name, "T4", 1, 1.0) for name in names])
    store = Store(tmp_path / "state")
    where = ["--hosts", str(path), "--state", str(tmp_path / "state")]

    async def scenario() -> None:
        options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)
        async with started_controller(load_hosts(path), store, options) as ctl:
            spec = write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000)
            await then(ctl, path, where, await running_past(ctl, spec, "a", 5, 90))

    run_and_clean(scenario, tmp_path)


def test_removing_a_busy_host_while_a_controller_runs_says_its_jobs_move_off(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    async def then(ctl: Controller, path: Path, where: list[str], host: str) -> None:
        idle = next(h for h in ("one", "two", "spare") if h != host)
        await ctl.post(SetAutoApprove(False))  # as t on the Plan screen
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["hosts", "remove", idle, *where]) == 0
        assert capsys.readouterr().out == f'removed host "{idle}" from {path}\n', "an idle host: nothing more"
        assert await asyncio.to_thread(main, ["hosts", "remove", host, *where]) == 0
        said = capsys.readouterr().out
        assert said == (f'removed host "{host}" from {path}\n'
                        "It runs a: drained first, it moves off at the next plan you approve, then it is "
                        "dropped.\n"), said
        await wait_for(ctl, lambda s: any(h.name == host and h.drained for h in s.hosts), 30, f"{host} drained")
        snap = await wait_for(ctl, lambda s: s.plan is not None and any(c.job_id == "a" for c in s.plan.changes),
                              30, "a plan that moves a, waiting for approval")
        assert job(snap, "a").allocation.host_names == (host,), "still there: no plan approved"

    _with_a_running(tmp_path, ("one", "two", "spare"), then)


def test_under_auto_approve_a_busy_hosts_jobs_move_off_at_the_next_plan(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    async def then(ctl: Controller, path: Path, where: list[str], host: str) -> None:
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["hosts", "remove", host, *where]) == 0
        said = capsys.readouterr().out
        assert said.endswith("\nIt runs a: drained first, it moves off at the next plan, then it is dropped.\n"), said
        await wait_for(ctl, lambda s: job(s, "a").allocation is not None
                       and job(s, "a").allocation.host_names != (host,), 90, f"a moved off {host}")
        await wait_for(ctl, lambda s: host not in [h.name for h in s.hosts], 30, f"{host} dropped")

    _with_a_running(tmp_path, ("one", "two"), then)


def test_removing_a_busy_host_with_no_controller_running_says_its_jobs_are_held(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture) -> None:
    """What the store says runs there (as a controller that stopped left it: its job trains on)."""
    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.job import JobState

    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    where = ["--hosts", str(path), "--state", str(tmp_path / "state")]
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=100_000, max_gpus=1)), 0.0)
    store.set_state("a", JobState.RUNNING, 1.0)
    store.record_allocation(Allocation.of("a", "T4", {"two": [0]}), 1, 1.0, store.job("a").job.spec)
    # and one queued, whose checkpoint its last run left there: it was not said, and went with the host
    from heet_tui.control.checkpoint_hosts import CheckpointHosts

    store.add_job(load_job_spec(write_job(tmp_path, "b", steps=100_000, max_gpus=1)), 0.0)
    CheckpointHosts(store, lambda: 2.0).remember("b", "two")
    assert main(["hosts", "remove", "two", *where]) == 0
    said = capsys.readouterr().out
    assert ("It holds the checkpoint of b, not running now: no controller runs now; the next one keeps the host, "
            "drained, until it is copied to where the job starts next, then drops it.") in said, said
    assert said.startswith(f'removed host "two" from {path}\nIt runs a: no controller runs now to drain it; the next '
                           "one keeps the host, drained, until it moves off at the next plan you approve, then drops "
                           "it."), said
