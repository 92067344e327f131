"""Progress a job made while no controller watched it counts once a controller hears of it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.runtime import rank_agent_id
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState

STEPS = 200
OPTIONS = ControllerOptions(interval_s=0.3, profile=False, auto_approve=True)


def _run_to_its_end_unwatched(tmp_path: Path) -> tuple[Path, Store, int]:
    """Job "a" started by a controller that stops while it runs; returns once "a" has exited 0."""
    hosts_path = write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(load_hosts(hosts_path), store, OPTIONS)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=STEPS, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and store.job("a").job.steps_done >= 5,
                           90, "a running")
        finally:
            await ctl.stop()  # the job runs on, to its end, unwatched
        pattern = f"**/exits/{rank_agent_id('a', 0, store.store_id)}*"
        deadline = time.monotonic() + 120
        while not list((tmp_path / "w-only").glob(pattern)) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        (exit_file,) = (tmp_path / "w-only").glob(pattern)
        assert json.loads(exit_file.read_text())["exit_code"] == 0, "a ran to its end"

    run_and_clean(scenario, tmp_path)
    seen = store.job("a").job.steps_done
    assert seen < STEPS, "the case these tests are about: the store saw only part of it"
    return hosts_path, store, seen


def test_a_job_that_ended_while_the_controller_was_down_is_done_at_its_last_step(tmp_path: Path) -> None:
    """Seen with `make run`: the TUI quit while six jobs ran; they finished meanwhile, and the
    next TUI showed them "done" at 7-27 %, the steps it had seen before it quit."""
    hosts_path, store, _ = _run_to_its_end_unwatched(tmp_path)
    before = store.job("a").job

    async def scenario() -> None:
        again = Controller(load_hosts(hosts_path), store, OPTIONS)
        await again.start()
        assert again.notices == ["1 job(s) were running when the controller last stopped (a): looking for them "
                                 "on their hosts"], "one notice, whatever the number of jobs"
        try:
            snap = await wait_for(again, lambda s: job(s, "a").state is JobState.DONE, 60, "a done")
        finally:
            await again.stop()
        assert store.job("a").job.steps_done == STEPS and job(snap, "a").progress == 1.0
        after = store.job("a").job
        last = json.loads(next((tmp_path / "w-only").glob("**/logs/a.r0.*")).read_text().splitlines()[-1]
                          .split("@heet-progress ", 1)[1])
        unwatched_s = (last["samples"] - before.samples_done) / last["samples_per_s"]
        assert after.attained_gpu_s - before.attained_gpu_s >= 0.99 * unwatched_s, \
            "the GPU time it had unwatched counts as service"


    run_and_clean(scenario, tmp_path)


def test_a_job_that_ended_while_the_controller_was_down_ended_when_it_exited(tmp_path: Path) -> None:
    """Not when a controller next heard of it: a job done at night read as done in the morning,
    its completion time (and the jobs' mean) counted the night in."""
    hosts_path, store, _ = _run_to_its_end_unwatched(tmp_path)
    exit_file = next((tmp_path / "w-only").glob("**/exits/a.r0.*"))
    exited_at = json.loads(exit_file.read_text())["ended_at"]
    time.sleep(3.0)
    heard_from = time.time()
    run_and_clean(lambda: _run_until_done(hosts_path, store), tmp_path)
    ended = store.job("a").job.ended_at
    assert ended is not None and abs(ended - exited_at) < 1.0 and ended < heard_from - 2.0, (ended, exited_at)


async def _run_until_done(hosts_path: Path, store: Store) -> None:
    again = Controller(load_hosts(hosts_path), store, OPTIONS)
    await again.start()
    try:
        await wait_for(again, lambda s: job(s, "a").state is JobState.DONE, 60, "a done")
    finally:
        await again.stop()


def test_heet_tui_run_prints_the_controllers_notices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The TUI showed notices as toasts; `heet-tui run` printed none of them (a hosts file that did
    not reload, a failing round, the jobs it looks for after a restart)."""
    hosts_path, store, _ = _run_to_its_end_unwatched(tmp_path)
    capsys.readouterr()
    assert main(["run", "--until-idle", "--interval", "0.3", "--state", str(store.dir), "--hosts",
                 str(hosts_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.endswith("notice     1 job(s) were running when the controller last stopped (a): looking "
                             "for them on their hosts") for line in lines), lines
    assert store.job("a").job.state is JobState.DONE and store.job("a").job.steps_done == STEPS
