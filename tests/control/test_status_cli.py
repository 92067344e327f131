"""``heet-tui status``: hosts, GPUs in use and by whom, job counts and the pending plan, from a
shell, through the running controller or, with none running, from the store and hosts file."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest
from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.drains import set_drained
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

CONTROLLER_KEYS = ("running", "answering", "pid", "policy", "auto_approve", "read_only", "log", "error", "store_error")
HOST_KEYS = ("name", "state", "gpu_type", "gpus", "busy", "jobs", "drained", "note", "outside")


def test_with_no_controller_it_shows_the_declared_hosts_drains_and_job_counts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = write_local_hosts(tmp_path, [("a1", "A100", 2, 1.0), ("t1", "T4", 4, 0.25)])
    store = Store(tmp_path / "state")
    for name in ("x", "y", "z"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.set_state("z", JobState.CANCELLED, 1.0)
    set_drained(store, "t1", True, "t1 drained as broken: runs died there")
    state = ["--state", str(store.dir), "--hosts", str(hosts)]
    assert main(["status", *state]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("controller  not running")
    assert out[2].split() == ["HOST", "STATE", "GPUS", "IN", "USE", "JOBS", "NOTE"]
    assert out[1] == "hosts       2, 0 of 6 GPUs held by jobs as the last controller left them"
    assert out[3].split() == ["a1", "-", "2xA100", "0/2", "-"]
    assert out[4].split()[:4] == ["t1", "drained", "4xT4", "0/4"] and out[4].endswith(
        "t1 drained as broken: runs died there")
    assert out[5] == "jobs        2 queued, 1 cancelled, as the last controller left them  (heet-tui jobs)"
    assert main(["status", "--json", *state]) == 0
    report = json.loads(capsys.readouterr().out)
    # the keys a running controller's report has, null: a script reading controller.policy met a KeyError
    # the policy and auto-approve the next controller starts with are the store's (null read as unknown,
    # while plan show --json said auto-approve was on)
    assert report["controller"] == dict.fromkeys(CONTROLLER_KEYS) | {"running": False, "policy": "heet",
                                                                      "auto_approve": False, "read_only": False}
    Store(tmp_path / "state").set_setting("auto_approve", "true")
    assert main(["status", "--json", *state]) == 0
    assert json.loads(capsys.readouterr().out)["controller"]["auto_approve"] is True
    assert all(h["outside"] == {} for h in report["hosts"]) and report["notices_at"] == []
    # every state, 0 included: a script reading jobs["failed"] met a KeyError while none had failed
    assert report["jobs"] == {s.value: {"queued": 2, "cancelled": 1}.get(s.value, 0) for s in JobState}
    assert [(h["name"], h["gpus"], h["drained"]) for h in report["hosts"]] == [("a1", 2, False), ("t1", 4, True)]
    assert [h["state"] for h in report["hosts"]] == [None, None], "unknown: null, not the string '-'"


def test_with_a_controller_it_shows_who_holds_which_gpus_and_the_pending_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("one", "T4", 2, 1.0), ("two", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    state = ["--state", str(store.dir)]

    async def status(*extra: str) -> list[str]:
        assert await asyncio.to_thread(main, ["status", *extra, *state]) == 0
        return capsys.readouterr().out.splitlines()

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=5000, max_gpus=2))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan")
            out = await status()
            assert out[0].startswith("controller  running (pid ") and "policy heet, auto-approve off" in out[0]
            assert out[1] == "hosts       2 of 2 ready, 0 of 3 GPUs in use"
            assert out[-1] == f"plan        #{snap.plan_id} pending (1 start): heet-tui plan show"
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            held = snap.plan.allocations["a"] if snap.plan else job(snap, "a").allocation
            out = await status()
            rows = {line.split()[0]: line.split() for line in out[3:5]}
            for host, gpus in held.hosts:
                assert rows[host][3] == f"{len(gpus)}/{2 if host == 'one' else 1}" and rows[host][4] == "a"
            assert "jobs        1 running  (heet-tui jobs)" in out
            said = [line for line in out if line.startswith("notice      ")]  # dated: it may be old news
            assert said and re.match(r"notice      \d\d:\d\d:\d\d plan #\d+: 1 step\(s\) done", said[-1]), said
            report = json.loads("\n".join(await status("--json")))
            assert sorted(report["controller"]) == sorted(CONTROLLER_KEYS) and report["controller"]["answering"]
            assert all(set(h) == set(HOST_KEYS) for h in report["hosts"])
            assert report["controller"]["running"] and {s: n for s, n in report["jobs"].items() if n} == {"running": 1}
            assert sum(h["busy"] for h in report["hosts"]) == held.num_gpus

    run_and_clean(scenario, tmp_path)


def test_a_watch_only_controller_is_said_to_be_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was shown as "policy heet, auto-approve off", like one that would act on an approval."""
    from control_lab import started_controller

    from heet_tui.control.controller import ControllerOptions

    hosts = load_hosts(write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(hosts, store, ControllerOptions(interval_s=0.3, read_only=True)) as ctl:
            await wait_for(ctl, lambda s: s.read_only and s.hosts, 60, "a snapshot")
            assert await asyncio.to_thread(main, ["status", "--state", str(store.dir)]) == 0
            first = capsys.readouterr().out.splitlines()[0]
            assert "watch-only (started by heet-tui --read-only: it launches, profiles and applies nothing)" in first
            assert "auto-approve" not in first

    run_and_clean(scenario, tmp_path)


def test_with_no_controller_the_gpus_of_jobs_that_train_on_are_theirs_as_the_store_has_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Jobs train on while no controller runs; their hosts were listed as if idle."""
    from heet_tui.core.allocation import Allocation

    hosts = write_local_hosts(tmp_path, [("a1", "A100", 2, 1.0), ("a2", "A100", 2, 1.0), ("t1", "T4", 4, 0.25)])
    store = Store(tmp_path / "state")
    for name in ("x", "y", "done"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.record_allocation(Allocation.of("x", "A100", {"a1": [0, 1], "a2": [1]}), 1, 1.0)
    store.record_allocation(Allocation.of("y", "A100", {"a2": [0]}), 1, 1.0)
    store.record_allocation(Allocation.of("done", "T4", {"t1": [0, 1]}), 1, 1.0)
    store.release_allocation("done", 2.0)
    for name in ("x", "y"):
        store.set_state(name, JobState.RUNNING, 1.0)
    state = ["--state", str(store.dir), "--hosts", str(hosts)]
    assert main(["status", *state]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "hosts       3, 4 of 8 GPUs held by jobs as the last controller left them"
    assert [line.split() for line in out[3:6]] == [["a1", "-", "2xA100", "2/2", "x"],
                                                    ["a2", "-", "2xA100", "2/2", "x,", "y"],
                                                    ["t1", "-", "4xT4", "0/4", "-"]]
    assert main(["status", "--json", *state]) == 0
    rows = json.loads(capsys.readouterr().out)["hosts"]
    assert [(h["name"], h["busy"], h["jobs"]) for h in rows] == [("a1", 2, ["x"]), ("a2", 2, ["x", "y"]),
                                                                  ("t1", 0, [])]


def test_status_of_a_controller_that_does_not_answer_shows_what_the_store_has(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen under kill -STOP: status waited 5 s and printed only "cannot attach ...", exit 1: a
    cron check got no figures at all."""
    import heet_tui.control.attach_client as attach_client
    from heet_tui.config.job_spec import parse_job_text
    from heet_tui.control.attach import socket_path
    from heet_tui.control.snapshots import ControllerLock

    monkeypatch.setattr(attach_client, "CONNECT_TIMEOUT_S", 0.3)
    hosts = write_local_hosts(tmp_path, [("h", "T4", 2, 1.0)])
    state = tmp_path / "state"
    store = Store(state)
    store.add_job(parse_job_text('name = "a"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\n'
                                 "target = { steps = 10 }\n", tmp_path / "a.toml"), 1.0)
    lock = ControllerLock(state)
    lock.acquire()  # a controller holds the state, but is stopped

    async def scenario() -> int:
        server = await asyncio.start_unix_server(lambda r, w: None, path=str(socket_path(state)))  # never says hello
        try:
            return await asyncio.to_thread(main, ["status", "--state", str(state), "--hosts", str(hosts)])
        finally:
            server.close()

    try:
        assert asyncio.run(scenario()) == 1, "a problem, for a cron check"
    finally:
        lock.release()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"controller  pid {os.getpid()} does not answer (") and "kill -STOP" in out[0], out
    assert any(line.split()[:1] == ["h"] for line in out), "the hosts, as the file declares them"
    assert any("queued" in line for line in out), out


def test_a_host_out_of_reach_with_jobs_on_it_is_not_counted_against_the_gpus_known() -> None:
    """Seen: "a100-2  unreachable  -  2/0" and "2 of 4 GPUs in use", the 2 on a host whose GPUs the
    total did not count (it is out of reach: none are known until it is back)."""
    from heet_tui.cli.commands.status import _lines

    def host(name: str, state: str, gpus: int, busy: int) -> dict:
        return {"name": name, "state": state, "gpu_type": "A100", "gpus": gpus, "busy": busy, "jobs": ["j"] * bool(busy),
                "drained": False, "note": "", "outside": {}}

    report = {"controller": {"running": True, "pid": 1, "policy": "heet", "auto_approve": False, "read_only": False,
                             "log": "controller.log"},
              "hosts": [host("near", "ready", 4, 2), host("far", "unreachable", 0, 2)], "jobs": {}, "plan": None,
              "notices": []}
    out = _lines(report)
    assert out[1] == "hosts       1 of 2 ready, 2 of 4 GPUs in use, 2 more held on hosts out of reach"
    assert out[4].split()[:4] == ["far", "unreachable", "?xA100", "2/?"]


def test_a_host_jobs_keep_off_says_so_in_its_note(tmp_path: Path) -> None:
    """After a refused launch on hB its jobs' model kept off it, and status showed hB "ready" with
    an empty note."""
    import json as json_module

    from heet_tui.cli.commands.status import _with_kept_off
    from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

    store = Store(tmp_path / "state")
    for name, model, batch in (("c", "cifar10", 32), ("b", "bert", 12), ("old", "resnet", 8)):
        store.add_job(JobSpec(name, ("python3", "t.py"), model, batch, Target(TargetKind.STEPS, 10)), 0.0)
    store.set_state("old", JobState.DONE, 1.0)
    store.set_setting("crash_avoided", json_module.dumps([["cifar10", 32, ["hB"]], ["bert", 12, ["hB", "hC"]],
                                                          ["resnet", 8, ["hA"]]]))
    rows = _with_kept_off([{"name": "hA", "note": ""}, {"name": "hB", "note": "x"}, {"name": "hC", "note": ""}], store)
    # resnet's only job is done: nothing of it keeps off hA any more (the note stayed for good)
    assert [r["note"] for r in rows] == [
        "", "x; jobs of model bert at batch 12, model cifar10 at batch 32 keep off it (a run of theirs ended here, crashed or stopped hung, before its first report)",
        "jobs of model bert at batch 12 keep off it (a run of theirs ended here, crashed or stopped hung, before its first report)"]


def test_a_plan_auto_approve_leaves_to_the_user_says_why(tmp_path: Path) -> None:
    """Only the Plan screen and `run` said why a plan waited under auto-approve (a job started less
    than two minutes ago); `status` read "pending" as if nothing held it."""
    from heet_tui.cli.commands.status import _lines, _live_report
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import Plan
    from heet_tui.core.snapshot import Snapshot

    one = Allocation.of("e1", "A100", {"a": [0]})
    plan = Plan.build({"e1": one}, {"e1": Allocation.of("e1", "A100", {"a": [0, 1]})}, "heet", 0.0)
    why = "it restarts e1, started less than 120 s ago: auto-approve lets a job's new size be measured first"
    snap = Snapshot(now=1.0, hosts=(), jobs=(), plan=plan, plan_id=13, auto_approve=True, held_why=why)
    report = _live_report(snap, 1, Store(tmp_path / "state"))
    assert report["plan"] == {"id": 13, "changes": "1 grow", "held": why}
    said = f"plan        #13 pending (1 grow): heet-tui plan show; auto-approve leaves it to you: {why}"
    assert said in _lines(report), _lines(report)


def test_with_no_controller_a_host_removed_but_kept_for_its_job_is_listed_with_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """After `hosts remove b` with j3 running there, status counted j3 running and showed it on no host."""
    monkeypatch.setenv("COLUMNS", "200")  # the note whole, whatever the terminal running the tests
    from heet_tui.core.allocation import Allocation

    hosts = write_local_hosts(tmp_path, [("a", "T4", 1, 1.0), ("b", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j3", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.record_allocation(Allocation.of("j3", "T4", {"b": [0]}), 1, 1.0)
    store.set_state("j3", JobState.RUNNING, 1.0)
    state = ["--state", str(store.dir), "--hosts", str(hosts)]
    assert main(["hosts", "remove", "b", *state]) == 0
    capsys.readouterr()
    assert main(["status", *state]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.split()[:1] == ["b"])
    assert row.split()[1:5] == ["drained", "1xT4", "1/1", "j3"], row
    assert row.endswith("removed from the file; the next controller keeps it, drained, for its jobs"), row
