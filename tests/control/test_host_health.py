"""A host where jobs die at once while they run elsewhere is drained (control/host_health.py).

Seen: with a T4 host whose GPUs were gone ("CUDA error: no CUDA-capable device") beside a good
A100 host, job b was profiled on the T4 three times, crashing each time, and failed, while the
A100 host was idle.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, training_with, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.drains import drain_reasons
from heet_tui.control.host_health import HostHealth, stored_health
from heet_tui.control.runtime import Run
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def _run(job_id: str, hosts: dict[str, list[int]], reports: int = 0, profiling: bool = False,
         gpu_type: str = "T4") -> Run:
    return Run(job_id, Allocation.of(job_id, gpu_type, hosts), 1, {}, 0.0, profiling=profiling, reports=reports)


def test_two_classes_dying_at_once_on_a_host_where_one_ran_on_a_peer_make_it_broken() -> None:
    health = HostHealth()
    health.reported(_run("a", {"good": [0]}, reports=1), ("m", 32))
    health.crashed(_run("a", {"bad": [0]}, profiling=True), ("m", 32), "exit 1", 1.0, None)
    assert health.broken() == {}, "one class could be the job's own bug"
    assert health.avoid(("m", 32)) == {"bad"} and health.avoid(("n", 64)) == set()
    health.crashed(_run("a2", {"bad": [1]}), ("m", 32), "exit 1", 2.0, None)
    assert health.broken() == {}, "its twin is the same code"
    health.crashed(_run("b", {"bad": [0]}), ("n", 64), "exit 1", 3.0, ("T4", 1))
    assert [c.job_id for c in health.broken()["bad"]] == ["a", "a2", "b"]
    health.reported(_run("a", {"bad": [0]}, reports=1), ("m", 32))
    assert health.broken() == {} and health.avoid(("m", 32)) == set(), "it works there after all"


def test_a_twin_that_ran_is_no_evidence_against_a_host_where_a_job_of_its_class_never_ran() -> None:
    """A job with a typo'd script shares its model and batch with a sweep that ran on both A100
    hosts; it and another bad job crashed on each: both hosts were drained "as broken", each for
    the other's sake (3 of 5 GPUs out of service)."""
    health = HostHealth()
    for host in ("a", "b"):
        health.reported(_run(f"sweep-{host}", {host: [0]}, reports=5, gpu_type="A100"), ("cifar10", 64))
    for host in ("a", "b"):
        health.crashed(_run("typo-path", {host: [0]}, gpu_type="A100"), ("cifar10", 64), "exit 2", 1.0, None)
        health.crashed(_run("crasher2", {host: [0]}, gpu_type="A100"), ("oom-model", 64), "exit 1", 2.0, None)
        assert health.broken() == {}


@pytest.mark.parametrize("case", ["progress there since", "ran elsewhere at another count only",
                                  "ran elsewhere on another type only", "crashed after reporting",
                                  "spread over two hosts"])
def test_what_is_not_evidence_of_a_broken_host(case: str) -> None:
    health = HostHealth()
    elsewhere = _run("a", {"good": [0, 1]} if case.startswith("ran elsewhere at") else {"good": [0]}, reports=1,
                     gpu_type="A100" if case.endswith("type only") else "T4")  # a model the T4's memory cannot hold
    health.reported(elsewhere, ("m", 32))
    health.crashed(_run("a", {"bad": [0]}), ("m", 32), "exit 1", 1.0, None)
    b = _run("b", {"bad": [0], "good": [1]} if case == "spread over two hosts" else {"bad": [0]},
             reports=3 if case == "crashed after reporting" else 0)
    if case == "progress there since":
        health.reported(_run("c", {"bad": [1]}, reports=1), ("o", 8))
    health.crashed(b, ("n", 64), "exit 1", 2.0, None)
    assert health.broken() == {}


def test_a_launch_one_host_of_a_spread_run_refused_keeps_the_class_off_that_host() -> None:
    """Seen: rank 0's checkpoint dir on h1 was blocked; every minute the plan put the job on h1 and
    h2 again (h3 idle), each launch refused on h1 and blamed on h2's rank, never launched."""
    from heet_tui.control.runtime import NOT_LAUNCHED, RankProc

    run = _run("a", {"h1": [0], "h2": [0]})
    run.ranks = {0: RankProc("h1", "a.r0", 0, (0,), "exited", 127, None, "launch refused: cannot claim /ck"),
                 1: RankProc("h2", "a.r1", 1, (0,), "exited", None, None, NOT_LAUNCHED)}
    health = HostHealth()
    health.crashed(run, ("m", 32), "rank 0 on h1: launch refused: cannot claim /ck", 1.0, None)
    assert health.avoid(("m", 32)) == {"h1"}
    assert [c.job_id for c in health.crashes["h1"]] == ["a"] and "h2" not in health.crashes


def _fragile(root: Path) -> list[str]:
    """A training script that dies at once on the host named "broken" (its GPUs are gone)."""
    return training_with(root, "fragile", "if os.path.basename(os.getcwd()) == 'broken':\n"
                         "    print('RuntimeError: CUDA error: no CUDA-capable device is detected', file=sys.stderr)\n"
                         "    sys.exit(1)")


def _run_all(root: Path, hosts_spec: list[tuple[str, str, int, float]], jobs: list[tuple[str, str]]) -> Store:
    """Run (name, model) jobs of the fragile script to their end with auto-approve."""
    hosts = load_hosts(write_local_hosts(root, hosts_spec))
    store = Store(root / "state")
    cmd = _fragile(root)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True))
        await ctl.start()
        try:
            for name, model in jobs:
                await ctl.post(SubmitJob(str(write_job(root, name, steps=60, max_gpus=1, command=cmd, model=model))))
            await wait_for(ctl, lambda s: len(s.jobs) == len(jobs) and all(j.state.terminal for j in s.jobs), 180,
                           "every job to end")
        finally:
            await ctl.stop()

    run_and_clean(scenario, root)
    return store


def test_a_job_that_dies_at_once_on_a_host_is_retried_on_another(tmp_path: Path) -> None:
    """The first report: T4 host broken, A100 host fine. b failed after three tries on the T4."""
    store = _run_all(tmp_path, [("good", "A100", 1, 1.0), ("broken", "T4", 1, 1.0)], [("a", "a"), ("b", "b")])
    assert {r.job.id: r.job.state for r in store.jobs()} == {"a": JobState.DONE, "b": JobState.DONE}
    events = store.events(limit=500)
    assert not any(e.kind == "drained" for e in events), "no peer of its type shows the host is broken"
    assert all("good" in e.message for e in events if e.kind == "launch")
    assert any("profiling on 1xT4 on broken[0] crashed" in e.message and "not counted" in e.message
               for e in events if e.job_id == "a"), "a's round measured it on the A100: its T4 crash is no attempt"


def test_a_broken_host_among_peers_is_drained_and_its_crashes_forgiven(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _run_all(tmp_path, [("good", "T4", 1, 1.0), ("broken", "T4", 1, 1.0)],
                     [("a", "m"), ("b", "n"), ("a2", "m")])
    assert {r.job.state for r in store.jobs()} == {JobState.DONE}
    events = store.events(limit=500)
    drained = [e for e in events if e.kind == "drained"]
    assert len(drained) == 1 and drained[0].host == "broken", [e.message for e in events]
    assert "(1xT4 there too); their crashes there do not count" in drained[0].message
    assert "heet-tui hosts undrain broken" in drained[0].message
    assert drain_reasons(store) == {"broken": drained[0].message}, "the Cluster screen says why"
    assert all(r.crashes == 0 for r in store.jobs()), "the host's crashes used up no retry"
    capsys.readouterr()
    assert main(["hosts", "undrain", "broken", "--state", str(tmp_path / "state")]) == 0
    assert capsys.readouterr().out.strip() == "broken back in service"
    assert store.setting("drained") == "[]" and drain_reasons(store) == {}


def test_the_hosts_a_class_keeps_off_outlive_a_controller_restart(tmp_path: Path) -> None:
    """A restarted controller sent each class back once to the host it had crashed on."""
    store = Store(tmp_path / "state")
    for name, model in (("a", "m"), ("b", "n")):
        store.add_job(JobSpec(name, ("python3", "t.py"), model, 32, Target(TargetKind.STEPS, 10)), 0.0)
    health = stored_health(store)
    health.crashed(_run("a", {"bad": [0]}), ("m", 32), "exit 1", 1.0, None)
    health.crashed(_run("b", {"bad": [1]}), ("n", 32), "exit 1", 2.0, None)
    health.crashed(_run("b", {"worse": [0]}), ("n", 32), "exit 1", 3.0, None)
    again = stored_health(store)
    assert again.avoid(("m", 32)) == {"bad"} and again.avoid(("n", 32)) == {"bad", "worse"}
    again.reported(_run("b", {"bad": [1]}, reports=1), ("n", 32))  # it ran there after all
    assert stored_health(store).avoid(("n", 32)) == {"worse"}
    store.set_state("a", JobState.CANCELLED, 4.0)  # a class with no live job is forgotten
    again.forget("worse")
    assert stored_health(store).avoided == {}
    store.set_setting("crash_avoided", "[[\"m\", \"not a batch\"]]")
    assert stored_health(store).avoided == {}, "unreadable: nothing avoided, not a crash"


def test_one_jobs_own_crash_on_a_host_drains_nothing(tmp_path: Path) -> None:
    """A script that dies at once wherever it goes is the script's fault: no host is drained."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("one", "A100", 1, 1.0), ("two", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True))
        await ctl.start()
        try:
            for name in ("x", "y"):
                await ctl.post(SubmitJob(str(write_job(tmp_path, name, steps=60, max_gpus=1,
                                                       command=["python3", "-c", "import sys; sys.exit(3)"]))))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not all(r.job.state.terminal for r in store.jobs()):
                await asyncio.sleep(0.5)
            snap = await wait_for(ctl, lambda s: True, 5, "a snapshot")
            assert {job(snap, n).state for n in ("x", "y")} == {JobState.FAILED}
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    assert not any(e.kind == "drained" for e in store.events(limit=500)) and store.setting("drained") is None


def test_a_class_kept_off_a_host_waits_for_the_others_while_they_are_busy() -> None:
    """The others were counted from hosts with a free GPU only: while the good host profiled a
    job, they "could not hold" the class, and it was planned on the host it had crashed on."""
    from heet_tui.control.host_health import keep_off_crash_hosts
    from heet_tui.control.planning import JobInput
    from heet_tui.core.gpu import Gpu
    from heet_tui.core.host import HostState
    from heet_tui.core.sched_input import ClusterView, Constraints, HostView
    from heet_tui.core.snapshot import HostStatus

    health = HostHealth()
    health.crashed(_run("a", {"broken": [0]}), ("m", 32), "exit 1", 1.0, None)
    queued = JobInput("a", JobState.QUEUED, 1, 1, (), 0, 0.0, 0.0, 1e5, None, Constraints())
    only_broken_free = ClusterView((HostView("broken", "T4", 1, (0,)),))
    statuses = [HostStatus(name, HostState.READY, gpus=(Gpu(0, "T4"),)) for name in ("broken", "good")]
    [busy] = keep_off_crash_hosts([queued], only_broken_free, health, {"a": ("m", 32)}, statuses)
    assert busy.constraints.held, "the good host is busy: wait for it, not the broken one"
    free_too = ClusterView((HostView("broken", "T4", 1, (0,)), HostView("good", "T4", 1, (0,))))
    [pinned] = keep_off_crash_hosts([queued], free_too, health, {"a": ("m", 32)}, statuses)
    assert pinned.constraints.pinned_hosts == ("good",) and not pinned.constraints.held
    [alone] = keep_off_crash_hosts([queued], only_broken_free, health, {"a": ("m", 32)}, statuses[:1])
    assert alone.constraints == Constraints(), "no other host at all: the suspect one rather than never"


def test_a_spread_launch_refused_on_one_host_says_why_and_the_job_moves_off_it(tmp_path: Path) -> None:
    """A blocked checkpoint dir on h1: the step said only "launch on ... failed", the crash was
    blamed on h2's rank "lost: not launched", and every plan tried h1 again while h3 was free."""
    from heet_tui.core.intents import DrainHost

    hosts = load_hosts(write_local_hosts(tmp_path, [("h1", "T4", 1, 1.0), ("h2", "T4", 1, 1.0),
                                                    ("h3", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    (tmp_path / "w-h1" / "checkpoints").mkdir(parents=True)
    (tmp_path / "w-h1" / "checkpoints" / f"spread.{store.store_id[:8]}").write_text("in the way")
    spec = write_job(tmp_path, "spread", steps=100_000, max_gpus=2, own_checkpoint_dir=False)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(DrainHost("h3"))
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: any(e.kind == "crashed" for e in store.events("spread", limit=50)), 60,
                           "the refused launch")
            (crash,) = [e.message for e in store.events("spread", limit=50) if e.kind == "crashed"]
            assert crash.startswith("spread generation 1: rank ") and " on h1: launch refused: " in crash, crash
            steps = [s for p in range(1, 6) for s in store.steps(p) if s.status == "failed"]
            assert steps and "on h1: launch refused: " in steps[0].message, steps
            assert " on h1: launch refused: " in job(ctl.hub.latest, "spread").message
            await ctl.post(DrainHost("h3", drained=False))
            snap = await wait_for(ctl, lambda s: job(s, "spread").state is JobState.RUNNING, 90, "spread running")
            assert sorted(job(snap, "spread").allocation.host_names) == ["h2", "h3"]
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def _kept_off_bad(tmp_path: Path, then) -> Store:
    """Jobs "long" and "w" whose classes keep off host "bad" (runs of theirs died there), on hosts
    bad and good of one GPU each; ``then(ctl, state, snap)`` runs once long trains on good and w
    waits, saying why."""
    import json

    hosts_path = write_local_hosts(tmp_path, [("bad", "T4", 1, 1.0), ("good", "T4", 1, 1.0)])
    state = tmp_path / "state"
    for name in ("long", "w"):
        assert main(["--state", str(state), "--hosts", str(hosts_path), "submit",
                     str(write_job(tmp_path, name, steps=100_000, max_gpus=1, every=1000))]) == 0
    store = Store(state)
    store.set_setting("crash_avoided", json.dumps([["long", 32, ["bad"]], ["w", 32, ["bad"]]]))

    async def scenario() -> None:
        ctl = Controller(load_hosts(hosts_path), store, ControllerOptions(interval_s=0.3, auto_approve=True,
                                                                          profile=False))
        await ctl.start()
        try:
            snap = await wait_for(ctl, lambda s: job(s, "long").state is JobState.RUNNING
                                  and "keeps off" in job(s, "w").message, 60, "w saying why it waits")
            assert job(snap, "long").allocation.host_names == ("good",)
            await then(ctl, state, snap)
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    return store


def test_a_job_waiting_beside_a_host_its_class_keeps_off_says_so(tmp_path: Path) -> None:
    """Seen: beside a free GPU on the host its class had crashed on, a job read "the heet plan gives
    the free 2xA100 GPUs to no job" for minutes, and nothing named the host it kept off."""
    async def then(ctl, state, snap) -> None:
        assert ("; it keeps off bad, where a run of its model and batch size died before its first progress "
                "report (it goes back there when no other host could hold it, or once it is retried or updated)"
                ) in job(snap, "w").message

    _kept_off_bad(tmp_path, then)


async def _starts_on_bad_said(ctl, state, said: str) -> None:
    snap = await wait_for(ctl, lambda s: job(s, "w").state is JobState.RUNNING, 60, "w to start")
    assert job(snap, "w").allocation.host_names == ("bad",)
    assert any(f"w: {said}, so it may run again on bad" in e.message for e in ctl.store.events("w"))
    assert stored_health(ctl.store).avoid(("long", 32)) == {"bad"}, "the other class still keeps off"


def test_an_updated_job_may_go_back_to_the_host_its_class_died_on(tmp_path: Path) -> None:
    """A job whose runs died on hostA for want of a workdir was fixed with `update` and retried;
    its model kept off hostA for good ("keep off it" in status minutes after it finished there)."""
    async def then(ctl, state, snap) -> None:
        fixed = write_job(tmp_path, "w", steps=100_000, max_gpus=1, every=1000, extra='workdir = "."\n')
        assert await asyncio.to_thread(main, ["--state", str(state), "update", str(fixed)]) == 0
        await _starts_on_bad_said(ctl, state, "updated")

    _kept_off_bad(tmp_path, then)


def test_a_retried_job_may_go_back_to_the_host_its_class_died_on(tmp_path: Path) -> None:
    """A sweep member's own bug (a divergence guard) crashed it on both hosts; retried after the
    fix, it ran on one, and every member of the sweep kept off the other for good."""
    async def then(ctl, state, snap) -> None:
        assert await asyncio.to_thread(main, ["--state", str(state), "cancel", "w"]) == 0
        await wait_for(ctl, lambda s: job(s, "w").state is JobState.CANCELLED, 30, "w cancelled")
        assert await asyncio.to_thread(main, ["--state", str(state), "retry", "w"]) == 0
        await _starts_on_bad_said(ctl, state, "retried")

    _kept_off_bad(tmp_path, then)


def test_a_job_that_failed_for_good_no_longer_keeps_its_class_off_the_hosts_it_alone_crashed_on() -> None:
    """A failed job with a typo'd script kept a sweep of its model and batch off an idle T4 host
    ("a run of theirs ended here"), new submissions too, while other jobs of the class lived on."""
    health = HostHealth()
    health.crashed(_run("typo-path", {"c": [0]}), ("cifar10", 64), "exit 2", 1.0, None)
    health.crashed(_run("typo-path", {"d": [0]}), ("cifar10", 64), "exit 2", 2.0, None)
    health.crashed(_run("sweep-3", {"d": [1]}), ("cifar10", 64), "exit 1", 3.0, None)
    assert health.avoid(("cifar10", 64)) == {"c", "d"}
    health.job_failed("typo-path")
    assert health.avoid(("cifar10", 64)) == {"d"}, "sweep-3 died at once on d too"
