"""Processes another state store started on the same hosts are not this controller's.

Agents keep the records of the processes they ran (a restarted agent re-adopts them, and
reports those that ended meanwhile). A job id and generation are only unique within one
state store, so a fresh store (a deleted state dir, or a second one beside the first) names
its jobs' processes as an older store did. Before agent ids carried the store, a restarted
controller matched its running job to the older store's finished process of the same name
and marked the job done at once, while its training went on unwatched. Another store's
running processes are left alone (their GPUs kept out of plans), and a job's default
checkpoint dir is the store's own.
"""

from __future__ import annotations

from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cluster.events import RemoteJob
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions, Executor
from heet_tui.control.recovery import judge_reported
from heet_tui.control.runtime import RankProc, Run, parse_agent_id, rank_agent_id
from heet_tui.control.store import Store
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState

STEPS = 600


def test_a_fresh_store_does_not_take_an_older_stores_finished_process_for_its_own(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "A100", 1, 1.0)]))
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()

    async def scenario() -> None:
        old = Controller(hosts, Store(tmp_path / "state-old"), options)
        await old.start()
        try:
            await old.post(SubmitJob(str(write_job(tmp_path / "first", "a", steps=20, max_gpus=1))))
            await wait_for(old, lambda s: job(s, "a").state is JobState.DONE, 90, "the old store's a done")
        finally:
            await old.stop()

        store = Store(tmp_path / "state-new")
        new = Controller(hosts, store, options)
        await new.start()
        try:
            await new.post(SubmitJob(str(write_job(tmp_path / "second", "a", steps=STEPS, max_gpus=1))))
            await wait_for(new, lambda s: job(s, "a").state is JobState.RUNNING
                           and store.job("a").job.steps_done >= 20, 90, "the new store's a running")
        finally:
            await new.stop()  # as after a crash: the job keeps running on its host
        generation = store.job("a").generation

        again = Controller(hosts, store, options)
        await again.start()
        try:
            snap = await wait_for(again, lambda s: job(s, "a").state.terminal, 150, "a to end")
        finally:
            await again.stop()
        assert job(snap, "a").state is JobState.DONE, job(snap, "a").message
        assert store.job("a").job.steps_done == STEPS, "done only once its own process reached the target"
        assert store.job("a").generation == generation, "re-adopted, not launched again"

    run_and_clean(scenario, tmp_path)


def test_another_stores_running_job_is_left_alone_and_its_gpu_kept_out_of_plans(tmp_path: Path) -> None:
    """Before, a controller on another --state fenced (killed) whatever it did not know."""
    import os

    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 2, 1.0)]))
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()

    async def scenario() -> None:
        old_store = Store(tmp_path / "state-old")
        old = Controller(hosts, old_store, options)
        await old.start()
        try:
            await old.post(SubmitJob(str(write_job(tmp_path / "first", "a", steps=100000, max_gpus=1))))
            snap = await wait_for(old, lambda s: job(s, "a").state is JobState.RUNNING
                                  and old_store.job("a").job.steps_done >= 10, 90, "the old store's a running")
        finally:
            await old.stop()  # its job runs on
        (held,) = job(snap, "a").allocation.hosts[0][1]
        agent_id = rank_agent_id("a", 0, old_store.store_id)
        pid = next(j.pid for j in old.cluster.jobs("solo") if j.job_id == agent_id)

        store = Store(tmp_path / "state-new")
        new = Controller(hosts, store, options)
        await new.start()
        try:
            await new.post(SubmitJob(str(write_job(tmp_path / "second", "b", steps=100000, max_gpus=2))))
            snap = await wait_for(new, lambda s: job(s, "b").state is JobState.RUNNING, 90, "b running")
            assert job(snap, "b").allocation.hosts == (("solo", (1 - held,)),), "kept off the other store's GPU"
            assert any("another state store" in n for n in snap.notices), snap.notices
            assert (held, "(another state store)") in snap.hosts[0].gpu_jobs, "the Cluster screen shows it busy"
            os.kill(pid, 0)  # still running
        finally:
            await new.stop()

    run_and_clean(scenario, tmp_path)


def test_reported_processes_of_another_store_are_never_matched(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    ours, theirs = store.store_id, "f" * 32
    assert parse_agent_id(rank_agent_id("a", 0, ours)) == ("a", "r", 0)

    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    rank = RankProc("h", rank_agent_id("a", 0, ours), 0, (0,), "unknown")
    executor.runs["a"] = Run("a", Allocation.of("a", "T4", {"h": [0]}), 3, {0: rank}, 0.0)
    reports = (RemoteJob("h", rank_agent_id("a", 0, theirs), 3, "exited", exit_code=0),
               RemoteJob("h", rank_agent_id("a", 0, theirs), 4, "running"),
               RemoteJob("h", "a.r0", 3, "exited", exit_code=0),  # from an agent of before stores named ids
               RemoteJob("h", rank_agent_id("a", 0, ours), 3, "exited", exit_code=0))
    verdicts = [v.action for v in judge_reported(executor, store, "h", reports)]
    assert verdicts == ["ignore", "foreign", "ignore", "exited"]
    legacy = RemoteJob("h", "a.r0", 5, "running")  # ours from before ids named stores, or nobody's
    assert [v.action for v in judge_reported(executor, store, "h", (legacy,))] == ["fence"]


def test_the_store_part_of_an_agent_id_is_short_and_parses(tmp_path: Path) -> None:
    store_id = Store(tmp_path / "state").store_id
    agent_id = rank_agent_id("my.job.r1", 12, store_id)
    assert agent_id.startswith("my.job.r1.r12.") and len(agent_id) <= len("my.job.r1.r12.") + 8
    assert parse_agent_id(agent_id) == ("my.job.r1", "r", 12)


def test_a_job_without_a_checkpoint_dir_runs_under_a_fresh_store_of_the_same_name(tmp_path: Path) -> None:
    """Its default dir was named after the job alone: the older store's claim made every launch
    fail ("holds another heet-tui state store's checkpoints") until the job failed."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 1, 1.0)]))
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)
    spec = write_job(tmp_path, "a", steps=30, max_gpus=1)
    spec.write_text("\n".join(line for line in spec.read_text().splitlines() if "checkpoint_dir" not in line))

    async def scenario() -> None:
        for state in ("state-old", "state-new"):
            ctl = Controller(hosts, Store(tmp_path / state), options)
            await ctl.start()
            try:
                await ctl.post(SubmitJob(str(spec)))
                snap = await wait_for(ctl, lambda s: job(s, "a").state.terminal, 90, f"a in {state} to end")
                assert job(snap, "a").state is JobState.DONE, job(snap, "a").message
            finally:
                await ctl.stop()

    run_and_clean(scenario, tmp_path)
