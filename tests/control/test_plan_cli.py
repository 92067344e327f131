"""Headless manual mode: ``heet-tui run`` says when a plan waits, ``heet-tui plan`` shows, approves
or rejects it through the running controller.

Seen: ``heet-tui run`` without ``--auto-approve`` printed nothing when it proposed a plan, and
nothing but the TUI could approve one: on a server, jobs waited with no word why.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from control_lab import (
    job,
    kill_local_jobs,
    manual_controller,
    run_and_clean,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.drains import set_drained
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, SubmitJob
from heet_tui.core.job import JobState


def _read_until(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if needle in line:
            return lines
    raise AssertionError(f"no {needle!r} in {lines}")


def test_a_plan_is_announced_shown_and_approved_from_the_command_line(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    hosts = write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)])
    state = ["--state", str(tmp_path / "state")]
    assert main(["plan", *state]) == 2
    assert "no state store in" in capsys.readouterr().err
    assert main(["submit", str(write_job(tmp_path, "a", steps=20, max_gpus=1)), *state]) == 0
    # none pending is an answer, as plan show --json gives it (it exited 1); acting on none is a failure
    assert main(["plan", *state]) == 0
    assert "no plan pending: no controller runs on" in capsys.readouterr().out
    assert main(["plan", "approve", *state]) == 1
    assert "no controller runs on" in capsys.readouterr().err
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    run = subprocess.Popen([sys.executable, "-m", "heet_tui.cli.main", "run", "--until-idle", "--interval", "0.3",
                            "--no-profile", "--hosts", str(hosts), *state], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env)
    try:
        said = _read_until(run, "proposed", 60)[-1]
        assert "plan #1 proposed: 1 start" in said and "heet-tui plan show|approve|reject --id 1" in said
        capsys.readouterr()
        assert main(["plan", *state]) == 0
        shown = capsys.readouterr().out.splitlines()
        assert shown[0].startswith("plan #1 by heet, proposed at ") and shown[0].endswith(": 1 start")
        assert any(line.split()[:3] == ["a", "start", "-"] and "1xT4 on only[0]" in line for line in shown)
        # a plan no longer pending is the state moving on, exit 1 as with none pending; 2 is for usage
        assert main(["plan", "approve", "--id", "2", *state]) == 1
        assert "plan #2 is not the one pending (plan #1 is)" in capsys.readouterr().err
        assert main(["plan", "approve", "--id", "1", *state]) == 0
        assert "approved" in capsys.readouterr().out
        _read_until(run, "controller stopped", 90)
        assert run.wait(30) == 0
        # a past plan, from the store: what it predicted, beside what became of its steps (it said
        # "plan #1 is not pending", and no controller needs to run for it)
        capsys.readouterr()
        assert main(["plan", "show", "--id", "1", *state]) == 0
        shown = capsys.readouterr().out.splitlines()
        assert shown[0].startswith("plan #1 by heet, applied; proposed at ") and shown[0].endswith(": 1 start")
        assert any(line.split()[:1] == ["JOB"] and line.split()[-1] == "STEP" for line in shown), shown
        assert any(line.split()[:3] == ["a", "start", "-"] and "done: running generation 1 on 1xT4" in line
                   for line in shown), shown
    finally:
        run.kill()
        kill_local_jobs(tmp_path)


def test_a_plan_made_before_a_host_was_drained_is_not_applied_onto_it(tmp_path: Path) -> None:
    """Seen: ``heet-tui hosts drain t4b`` then ``heet-tui plan approve`` within one round applied
    the pending plan, made before the drain, and started two jobs on the drained host."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("x", "T4", 1, 1.0), ("y", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            (target,) = snap.plan.allocations["a"].host_names
            set_drained(store, target, True)  # as heet-tui hosts drain does: the store, not an intent
            with pytest.raises(ValueError, match=f"out of date \\(it puts jobs on {target}, drained since\\); "
                                                 "a new plan follows"):
                await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and "a" in s.plan.allocations, 60, "a new plan")
            assert snap.plan.allocations["a"].host_names == (({"x", "y"} - {target}).pop(),)
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running off the drained host")

    run_and_clean(scenario, tmp_path)


def test_a_plan_asked_for_by_id_that_is_not_pending_is_an_error(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(tmp_path / "state")]

    async def scenario() -> None:
        async with manual_controller(hosts, store):
            assert await asyncio.to_thread(main, ["plan", "show", *state]) == 0
            assert await asyncio.to_thread(main, ["plan", "show", "--id", "9", *state]) == 2
            out, err = capsys.readouterr()
            assert "no plan pending" in out and f"no plan #9 in {tmp_path / 'state'}" in err  # "is not pending" hid that
            # nothing to approve is a failure, said on stderr: on stdout a script took it for data
            assert await asyncio.to_thread(main, ["plan", "approve", *state]) == 1
            out, err = capsys.readouterr()
            assert out == "" and "no plan pending" in err
            assert await asyncio.to_thread(main, ["plan", "reject", "--id", "3", *state]) == 1  # not 2: no usage error
            assert "plan #3 is not pending: no plan is" in capsys.readouterr().err

    run_and_clean(scenario, tmp_path)


def test_plan_show_says_how_sure_each_completion_is() -> None:
    from heet_tui.cli.commands.plan import _completes
    from heet_tui.core.plan import JobPrediction

    def pred(spread):
        return JobPrediction("j", 1.0, 2.0, 3600.0, 0.0, after_spread=spread)

    assert [_completes(pred(s)) for s in (0.0, 0.2, None)] == ["1h00m", "1h00m ±20%", "1h00m ±?"]
    assert _completes(None) == "-"


def test_plan_show_lists_the_jobs_the_plan_leaves_waiting(capsys: pytest.CaptureFixture[str]) -> None:
    """The Plan screen showed "wide-cnn wait → A100 in 8s"; plan show left the row out."""
    from heet_tui.cli.commands.plan import _show
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect

    run = Allocation.of("r", "A100", {"a": [0]})
    effect = PredictedEffect((JobPrediction("r", 100.0, 100.0, 40.0, 0.0),
                              JobPrediction("w", 0.0, 0.0, 90.0, 0.0, 8.0, "A100")))
    _show(Plan.build({"r": run}, {"r": run}, "heet", 0.0, effect), 3, "heet", "proposed")
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("w "))
    assert row.split()[:7] == ["w", "wait", "-", "starts", "on", "A100", "in"] and "1m30s" in row


def test_after_a_reject_jobs_say_so_and_plan_again_proposes_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen: after ``plan reject`` a queued job said "every GPU it may use is taken" with every GPU
    idle (what the rejected plan handed out counted as taken), and only the TUI's p planned again."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(tmp_path / "state")]

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=2))))
            wide = write_job(tmp_path, "wide", steps=2000, max_gpus=2)
            wide.write_text(wide.read_text().replace("min_gpus = 1", "min_gpus = 2"))
            await ctl.post(SubmitJob(str(wide)))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            first = snap.plan_id
            assert await asyncio.to_thread(main, ["plan", "reject", "--id", str(first), *state]) == 0
            assert "heet-tui plan again" in capsys.readouterr().out
            snap = await wait_for(ctl, lambda s: all("rejected" in job(s, j).message for j in ("a", "wide")), 30,
                                  "the queued jobs told of the reject")
            assert not any("taken" in job(snap, j).message for j in ("a", "wide")), "the GPUs are idle"
            assert await asyncio.to_thread(main, ["plan", *state]) == 0
            # it said only "no plan pending: the current allocation stands", with two jobs queued
            said = capsys.readouterr().out.strip()
            assert said.startswith("no plan pending: the current allocation stands. ") and said.endswith(
                "waiting with nothing proposed (left out by the policy, or in a plan you rejected, which is not "
                "proposed again until something changes); heet-tui plan again proposes anew.")
            assert await asyncio.to_thread(main, ["plan", "again", *state]) == 0
            assert "planning again" in capsys.readouterr().out
            await wait_for(ctl, lambda s: s.plan_id is not None and s.plan_id != first, 30, "a new plan")

    run_and_clean(scenario, tmp_path)


def test_a_bare_approve_says_which_plan_it_approved_and_what_that_does(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`plan` showed #19; seconds later a bare `plan approve` printed "plan #20 approved": #20 had
    replaced it, and nothing said that it put the job elsewhere."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(tmp_path / "state")]

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            capsys.readouterr()
            assert await asyncio.to_thread(main, ["plan", "approve", *state]) == 0
            out = capsys.readouterr().out.splitlines()
            assert f"plan #{snap.plan_id} approved" in out[0], out
            assert "  start a: - -> 1xT4 on only[0]" in out, out

    run_and_clean(scenario, tmp_path)
