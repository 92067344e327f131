"""``heet-tui plan show --json``: a script deciding whether to approve reads numbers, not the table."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, SubmitJob
from heet_tui.core.job import JobState


def test_the_pending_plan_and_a_past_one_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(tmp_path / "state")]
    keys = {"plan": None, "auto_approve": False, "read_only": False, "controller_running": True}

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            assert await asyncio.to_thread(main, ["plan", "show", "--json", *state]) == 0
            assert json.loads(capsys.readouterr().out) == keys
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            assert await asyncio.to_thread(main, ["plan", "--json", *state]) == 0
            shown = json.loads(capsys.readouterr().out)
            plan = shown["plan"]
            assert (plan["id"], plan["status"], plan["summary"], shown["read_only"]) == \
                (snap.plan_id, "proposed", "1 start", False)
            (change,) = plan["changes"]
            assert (change["job"], change["kind"], change["before"], change["step"]) == ("a", "start", None, None)
            assert change["after"] == {"gpu_type": "T4", "gpus": 1, "hosts": {"only": [0]}, "text": "1xT4 on only[0]"}
            expected = snap.plan.effect.for_job("a")
            # never measured (no profiling here): its figures are unknown, not 0 samples/s
            assert (expected.throughput_after, expected.completion_s) == (0.0, None)
            assert change["completes_in_s"] is None and change["throughput_after"] is None
            assert change["throughput_before"] == 0.0, "it held no GPUs before"
            assert plan["starts_without_checkpoint"] == [] and plan["waiting"] == []
            # approve prints one line of what it did; --json there would promise what it does not give
            assert await asyncio.to_thread(main, ["plan", "approve", "--json", *state]) == 2
            assert "--json is for plan show" in capsys.readouterr().err
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            # a past plan, from the store, with what became of its step
            assert await asyncio.to_thread(main, ["plan", "show", "--id", str(snap.plan_id), "--json", *state]) == 0
            shown = json.loads(capsys.readouterr().out)
            past = shown["plan"]
            assert past["status"] == "applied" and past["changes"][0]["step"]["status"] == "done"
            assert set(shown) == set(keys), "the same keys as the pending plan's"

    run_and_clean(scenario, tmp_path)
    # no controller: the same keys, and none pending (it printed no JSON and exited 1)
    assert main(["plan", "show", "--json", *state]) == 0
    assert json.loads(capsys.readouterr().out) == {**keys, "controller_running": False}
    assert main(["plan", "show", *state]) == 0, "none pending is an answer, as with --json"
    assert "no plan pending: no controller runs on" in capsys.readouterr().out


def test_an_unmeasured_speed_is_null_not_zero() -> None:
    """Under --no-profile a never-measured job's start read "throughput_after": 0.0 beside
    "completes_in_s": null: a script computing gains read it as a job that would not train."""
    from heet_tui.cli.commands.plan_json import plan_obj
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect

    a, b = Allocation.of("new", "T4", {"h": [0]}), Allocation.of("old", "T4", {"h": [1]})
    effect = PredictedEffect((JobPrediction("new", 0.0, 0.0, None, 30.0),
                              JobPrediction("old", 120.0, 0.0, None, 0.0)))
    plan = Plan.build({"old": b}, {"new": a}, "heet", 0.0, effect)
    changes = {c["job"]: c for c in plan_obj(plan, 1, "heet", "proposed")["changes"]}
    assert (changes["new"]["throughput_before"], changes["new"]["throughput_after"]) == (0.0, None), \
        "it held no GPUs before: 0 is true; on its new GPUs nobody measured it"
    assert (changes["old"]["throughput_before"], changes["old"]["throughput_after"]) == (120.0, 0.0), "stopped: 0"


def test_the_plan_pending_when_the_controller_stopped_is_shown_from_the_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`plan show --id 7 --json` of the plan pending when the controller stopped printed no JSON:
    "plans are made by a running one", of the one plan a script was most likely to ask about."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(tmp_path / "state")]
    pending: list[int] = []

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=2000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            pending.append(snap.plan_id)

    run_and_clean(scenario, tmp_path)
    assert main(["plan", "show", "--id", str(pending[0]), "--json", *state]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["plan"]["id"] == pending[0] and shown["plan"]["status"] == "proposed"
    assert shown["controller_running"] is False
    assert main(["plan", "show", "--id", str(pending[0]), *state]) == 0
    assert "pending when its controller stopped" in capsys.readouterr().out
    assert main(["plan", "approve", "--id", str(pending[0]), *state]) == 1, "approving it needs a controller"
