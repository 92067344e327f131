"""A job's restart pause is measured on the job (stop and start), and plans use it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, training_with, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.restart_costs import (
    DEFAULT_RESTART_S,
    cost_of,
    ended_twin_costs,
    restart_costs,
    start_seconds,
    stop_seconds,
)
from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def _run(start_samples: float | None = 1000.0) -> Run:
    return Run("j", Allocation.of("j", "T4", {"h": [0]}), 3, {0: RankProc("h", "j.r0", 0, (0,), "running")},
               started_at=100.0, start_samples=start_samples)


def test_start_is_the_time_to_the_second_report_less_the_work_it_reports() -> None:
    run = _run()
    run.reports = 2
    # 20 s after launch, 1,500 samples done since at 100/s: 15 s of work, 5 s of start-up
    assert start_seconds(run, {"samples": 2500.0, "samples_per_s": 100.0}, 120.0) == pytest.approx(5.0)
    run.reports = 3  # measured once per run
    assert start_seconds(run, {"samples": 2600.0, "samples_per_s": 100.0}, 121.0) is None
    adopted = _run(start_samples=None)  # re-adopted from an earlier controller: launch time unknown
    adopted.reports = 2
    assert start_seconds(adopted, {"samples": 2500.0, "samples_per_s": 100.0}, 120.0) is None
    run.reports = 2
    assert start_seconds(run, {"samples": 2500.0, "samples_per_s": 0}, 120.0) is None
    assert start_seconds(run, {"samples": "x", "samples_per_s": 100.0}, 120.0) is None


def test_stop_counts_only_the_controllers_own_stops_whose_end_was_seen() -> None:
    run = _run()
    assert stop_seconds(run, 130.0) is None  # nobody asked it to stop
    run.stop_reason, run.stop_sent_at = "resize", 124.0
    assert stop_seconds(run, 130.0) == pytest.approx(6.0)
    run.ranks[0].reason = "lost: no exit reported after stop"
    assert stop_seconds(run, 160.0) is None
    lost = _run()
    lost.stop_reason = "host h lost (timeout)"
    assert stop_seconds(lost, 130.0) is None


def test_a_jobs_cost_is_its_recent_median_start_plus_stop(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    for name in ("a", "b", "c"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10)), 0.0)
    for seconds in (4.0, 5.0, 90.0):  # one slow start (a cold cache) does not set the price
        store.add_restart_time("a", "start", seconds, 1.0)
    store.add_restart_time("a", "stop", 2.0, 1.0)
    store.add_restart_time("b", "stop", 3.0, 1.0)  # a stop alone says nothing about the start
    store.add_restart_time("c", "start", 3.0, 1.0)
    assert restart_costs(store) == {"a": pytest.approx(7.0), "c": pytest.approx(3.0)}
    store.set_state("c", JobState.CANCELLED, 2.0)  # ended: no round asks about it any more
    assert restart_costs(store) == {"a": pytest.approx(7.0)}


def test_a_plan_prices_the_pause_the_job_was_measured_to_take(tmp_path: Path) -> None:
    """A job whose start-up takes ~3 s: before this, every plan priced its start at 30 s."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    command = training_with(tmp_path, "slow_start", "time.sleep(3)")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "slow", steps=400, max_gpus=1, command=command))))
            snap = await wait_for(ctl, lambda s: s.plan is not None, 90, "a plan")
            phases = {phase for _, phase, _ in store.restart_times()}
            assert phases == {"start", "stop"}, "the profiling run's start and stop were timed"
            pause = next(p.restart_pause_s for p in snap.plan.effect.jobs if p.job_id == "slow")
            assert 3.0 <= pause < DEFAULT_RESTART_S
            assert job(snap, "slow").restart_s == pytest.approx(pause)
        finally:
            await ctl.stop()
            await asyncio.sleep(0)

    run_and_clean(scenario, tmp_path)


def test_a_twin_submitted_after_the_measured_ones_ended_takes_their_pause(tmp_path: Path) -> None:
    """A sweep's later member showed (and was priced at) the default 30 s once the twins whose
    pause was measured (~3 s) had finished."""
    store = Store(tmp_path / "state")
    for name, model in (("a", "cifar10"), ("b", "cifar10"), ("other", "bert")):
        store.add_job(JobSpec(name, ("python3", "t.py"), model, 64, Target(TargetKind.STEPS, 10)), 0.0)
    store.add_restart_time("a", "start", 2.0, 1.0)
    store.add_restart_time("a", "stop", 1.0, 1.0)
    store.add_restart_time("b", "start", 4.0, 1.0)
    store.add_restart_time("other", "start", 50.0, 1.0)
    assert ended_twin_costs(store) == {}, "nobody has ended"
    for name in ("a", "b", "other"):
        store.set_state(name, JobState.CANCELLED, 2.0)
    assert restart_costs(store) == {}
    ended = ended_twin_costs(store)
    assert ended == {("cifar10", 64): pytest.approx(3.5), ("bert", 64): pytest.approx(50.0)}
    assert cost_of("late", {}, set(), ended_twins=ended.get(("cifar10", 64))) == pytest.approx(3.5)
    assert cost_of("late", {"mate": 9.0}, {"mate"}, ended_twins=3.5) == 9.0, "a running twin's own pause first"
    assert cost_of("new", {}, set(), ended_twins=ended.get(("resnet", 64))) == DEFAULT_RESTART_S
