"""Jobs nothing can be measured of still run (control/unmeasured.py).

Seen with `heet-tui run --auto-approve`: a user's own script that prints no @heet-progress
lines was profiled again every 15 s for as long as the controller ran and never started, and
with `--no-profile` no job ever started.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control import planning
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.store import Store
from heet_tui.control.throughput import ThroughputBook
from heet_tui.control.unmeasured import (
    hide_nominal,
    overdue_profiling,
    silent,
    unmeasured_ids,
    unreported_gpu_s,
)
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import CancelJob, SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect
from heet_tui.profiling.configs import TYPICAL_SCALING_EXPONENT


def _silent_script(root: Path, seconds: float) -> list[str]:
    """A training script that knows nothing of heet-tui: it prints, sleeps and exits 0."""
    path = root / "silent_train.py"
    path.write_text("import time\nprint('epoch 0 loss 2.3', flush=True)\n"
                    f"time.sleep({seconds})\nprint('done', flush=True)\n")
    return [sys.executable, str(path)]


def _two_types_and_a_silent_script(tmp_path: Path):
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.5)]))
    return hosts, Store(tmp_path / "state"), _silent_script(tmp_path, 1.0)


def _profiling_events(store: Store, job_id: str) -> list[str]:
    return [e.message for e in store.events(job_id, limit=500) if e.kind == "profile"]


def test_a_script_without_progress_lines_is_profiled_once_then_planned_and_run(tmp_path: Path) -> None:
    hosts, store, command = _two_types_and_a_silent_script(tmp_path)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "mine", steps=100, max_gpus=1, command=command))))
            snap = await wait_for(ctl, lambda s: job(s, "mine").state is JobState.DONE, 90, "mine to finish")
        finally:
            await ctl.stop()
        assert job(snap, "mine").state is JobState.DONE
        starts = [m for m in _profiling_events(store, "mine") if "profiling on" in m]
        assert len(starts) == 1, starts
        assert any("measured no throughput" in m for m in _profiling_events(store, "mine"))
        assert store.job("mine").job.attained_gpu_s > 0.5, "its run counts as attained service without reports"

    run_and_clean(scenario, tmp_path)


def test_a_profiling_run_that_reports_nothing_is_stopped_and_the_plan_shows_no_made_up_figures(
        tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    command = _silent_script(tmp_path, 600.0)
    options = ControllerOptions(interval_s=0.2, execution=ExecOptions(profile_timeout_s=2.0, stop_grace_s=5))

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "long", steps=100, max_gpus=1, command=command))))
            snap = await wait_for(ctl, lambda s: s.plan is not None and "long" in s.plan.allocations, 60,
                                  "a plan for the unmeasured job")
            assert "long" in unmeasured_ids(store)
            prediction = snap.plan.effect.for_job("long")
            assert prediction is not None
            assert (prediction.throughput_after, prediction.completion_s) == (0.0, None), prediction
            assert snap.plan.effect.avg_jct_s is None
            assert not ctl.executor.profiles, "the profiling run was stopped"
            await ctl.post(CancelJob("long"))
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_profiling_run_keeps_to_its_jobs_stall_timeout_and_stop_grace(tmp_path: Path) -> None:
    # A job that says it is hung after 2 s of silence, and may be killed 1 s after SIGTERM: its
    # profiling run held its GPU for the controller's ten minutes, then 30 s more at its stop
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    script = tmp_path / "deaf.py"
    script.write_text("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "print('loading', flush=True)\ntime.sleep(600)\n")
    path = write_job(tmp_path, "deaf", steps=100, max_gpus=1, command=[sys.executable, str(script)],
                     extra="stall_timeout = 2\nstop_grace = 1\n")
    options = ControllerOptions(interval_s=0.2)
    assert (options.execution.profile_timeout_s, options.execution.stop_grace_s) == (600.0, 30.0)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(path)))
            await wait_for(ctl, lambda _: "deaf" in unmeasured_ids(store), 60, "its profiling run stopped")
            stops = [seconds for job_id, phase, seconds in store.restart_times() if phase == "stop"]
            assert len(stops) == 1 and stops[0] < 15, stops  # killed at its own grace, not the default 30 s
            await ctl.post(CancelJob("deaf"))
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_with_profiling_off_a_new_job_is_planned_and_runs(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            # long enough (seconds) for the agent to forward several progress lines, not one coalesced
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=300, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 90, "a to finish")
        finally:
            await ctl.stop()
        assert not _profiling_events(store, "a")
        assert {o[5] for o in store.observations("a")} == {"running"}, "measured while it ran"

    run_and_clean(scenario, tmp_path)


def test_nominal_throughput_takes_type_speeds_from_jobs_measured_on_both() -> None:
    book = ThroughputBook()
    for job_id, fast, slow in (("x", 400.0, 100.0), ("y", 90.0, 10.0)):
        book.add(job_id, "A100", (1,), fast)
        book.add(job_id, "T4", (1,), slow)
    nominal = book.nominal_function()
    assert nominal("A100", (1,)) / nominal("T4", (1,)) == pytest.approx(6.0)  # geometric mean of 4 and 9
    assert nominal("H100", (1,)) == 1.0, "a type no job compares has speed 1"
    assert nominal("T4", (2,)) / nominal("T4", (1,)) == pytest.approx(2 ** TYPICAL_SCALING_EXPONENT)


def _run(reports: int, stop_reason: str | None, started: float = 0.0, profiling: bool = True) -> Run:
    alloc = Allocation.of("j", "A100", {"h": [0, 1]})
    run = Run("j", alloc, 1, {0: RankProc("h", "j.p1", 0, (0,))}, started, profiling=profiling)
    run.reports, run.stop_reason = reports, stop_reason
    return run


def test_silent_overdue_and_unreported_time_rules() -> None:
    assert silent(_run(1, None)) and not silent(_run(2, None))
    assert not silent(_run(0, "cancel")), "a cancelled run says nothing about the script"
    waiting, measured = _run(0, None, started=0.0), _run(5, None, started=0.0)
    measured.observed_at = 8.0  # its rates settled: being stopped as profiled
    assert overdue_profiling({"j": [waiting, measured]}, 10.0, 10.0) == [waiting]
    assert overdue_profiling({"j": [waiting]}, 9.0, 10.0) == []
    quick = JobSpec("j", ("t",), "m", 8, Target(TargetKind.STEPS, 10), stall_timeout_s=3)
    waiting.spec = quick
    assert overdue_profiling({"j": [waiting]}, 3.0, 600.0) == [waiting], "silent past its stall timeout"
    waiting.spec = replace(quick, stall_timeout_s=0)
    assert overdue_profiling({"j": [waiting]}, 3.0, 600.0) == [], "0: never hung, the profiling limit holds"
    # two reports and then a hang: one rate measures nothing, and the run held its GPUs for good
    hung = _run(2, None, started=0.0)
    hung.spec, hung.progress_at = quick, 1.0
    assert overdue_profiling({"j": [hung]}, 5.0, 600.0) == [hung], "silent past its stall timeout"
    hung.spec = None
    assert overdue_profiling({"j": [hung]}, 600.0, 600.0) == [hung], "past the profiling limit"
    assert unreported_gpu_s(_run(0, None, started=5.0, profiling=False), 15.0) == 20.0  # 10 s x 2 GPUs
    assert unreported_gpu_s(_run(3, None, started=5.0, profiling=False), 15.0) == 0.0


def test_an_unmeasured_job_start_counts_as_gain_and_its_figures_are_hidden() -> None:
    alloc = Allocation.of("u", "A100", {"h": [0]})
    effect = PredictedEffect((JobPrediction("u", 0.0, 1.7, 1234.0, 0.0),), 1234.0, 2000.0)
    plan = Plan.build({}, {"u": alloc}, "heet", 0.0, effect)
    assert planning.gain(plan, ThroughputBook(), frozenset({"u"})) == 1.0
    hidden = hide_nominal(effect, {"u"})
    assert hidden.jobs[0].throughput_after == 0.0 and hidden.jobs[0].completion_s is None
    assert (hidden.avg_jct_s, hidden.avg_jct_before_s) == (None, None)
    assert hide_nominal(effect, {"other"}) is effect


def test_the_twins_of_a_job_whose_profiling_measured_nothing_are_unmeasured_too(tmp_path: Path) -> None:
    """Profiled one at a time through a class-mate, each twin of a silent script would have waited
    out a profiling round of its own (up to 10 minutes) to learn the same thing."""
    hosts, store, command = _two_types_and_a_silent_script(tmp_path)

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True))
        await ctl.start()
        try:
            for name in ("s1", "s2"):
                await ctl.post(SubmitJob(str(write_job(tmp_path, name, steps=100, max_gpus=1, command=command,
                                                       model="silent"))))
            await wait_for(ctl, lambda s: all(j.state is JobState.DONE for j in s.jobs), 90, "both done")
        finally:
            await ctl.stop()
        # s1, submitted first, is profiled for the class; s2 learns what it measured
        assert any("profiling on" in m for m in _profiling_events(store, "s1"))
        assert _profiling_events(store, "s2") == ["s2: not profiled: the profiling runs of its twin s1 measured no "
                                                  "throughput"]

    run_and_clean(scenario, tmp_path)


def test_a_controller_that_stops_stops_the_profiling_runs_it_started(tmp_path: Path) -> None:
    """Seen: a quit while a job was being profiled left its profiling runs training the job's whole
    target, unwatched, on the GPUs they held: nothing else ever stops them."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    stopped, listening = tmp_path / "got-sigterm", tmp_path / "handler-set"
    script = tmp_path / "slow_start.py"
    script.write_text("import signal, sys, time\n"
                      f"signal.signal(signal.SIGTERM, lambda *_: (open({str(stopped)!r}, 'w').close(), sys.exit(143)))\n"
                      f"open({str(listening)!r}, 'w').close()\n"
                      "print('loading', flush=True)\ntime.sleep(600)\n")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "p", steps=100, max_gpus=1,
                                                   command=[sys.executable, str(script)]))))
            # a SIGTERM before the script set its handler would kill it unseen, however it was sent
            await wait_for(ctl, lambda _: listening.exists(), 60, "its profiling run running")
        finally:
            await ctl.stop()
        for _ in range(100):
            if stopped.exists():
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the profiling run was left running")

    run_and_clean(scenario, tmp_path)
