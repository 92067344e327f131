"""The controller on real local-transport agents running examples/training.py (no SSH needed).

Manual approval through the Backend API, a drain that moves a running job (checkpoint-restart,
steps and loss carry on), a controller restart that re-adopts the running job without a second
launch, and a crashing job that is retried with backoff and then failed with its log tail.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from control_lab import (
    fast_retries,
    job,
    run_and_clean,
    started_controller,
    training_with,
    wait_for,
    write_job,
    write_local_hosts,
)
from support.sshd import kill_jobs_under

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.runtime import rank_agent_id
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, DrainHost, EditJob, RejectPlan, Replan, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.metrics import metric
from heet_tui.core.plan import ChangeKind
from heet_tui.core.sched_input import Constraints

PREFIX = "@heet-progress "


def _progress(log: Path) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in log.read_text().splitlines() if line.startswith(PREFIX)]


@pytest.fixture(autouse=True)
def _kill_leftovers(tmp_path: Path):
    yield
    for workdir in tmp_path.glob("w-*"):
        kill_jobs_under(workdir)


STEPS = 400


def test_approve_drain_move_and_restart_readopts(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 2, 0.7)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.5, execution=ExecOptions(stop_grace_s=20))

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            # Long enough that after the move (from step ~70) it is still running when the test
            # looks for it on the new host and when the second controller re-adopts it.
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=STEPS))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 90, "a proposed plan")
            assert job(snap, "a").state is JobState.QUEUED, "manual mode: nothing runs before approval"
            assert {o[1] for o in store.observations("a")} == {"A100", "T4"}, "profiled on both types"
            effect = await ctl.preview(EditJob(snap.plan_id, "a", Constraints(pinned_type="T4")))
            assert snap.plan.effect.at is not None and effect.at >= snap.plan.effect.at, "dated on one clock"
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING
                                  and store.job("a").job.steps_done >= 70, 90, "a past step 70")
            first_host = job(snap, "a").allocation.host_names[0]
            gen_before = store.job("a").generation
            assert metric(job(snap, "a").metrics, "loss") is not None, "its loss is shown while it runs"

            await ctl.post(DrainHost(first_host))
            assert any(e.kind == "drained" and e.message == f"{first_host} drained by hand (in the TUI)"
                       for e in store.events(limit=50)), "who drained it, and when"
            snap = await wait_for(ctl, lambda s: s.plan is not None and any(
                c.job_id == "a" and c.kind is not ChangeKind.START for c in s.plan.changes), 30, "a plan moving a")
            kind = next(c.kind for c in snap.plan.changes if c.job_id == "a")
            said: list[str] = []
            record = store.try_set_state  # what the job is said to be doing while it moves
            store.try_set_state = lambda job_id, state, at, message="": (
                said.append(message) if job_id == "a" and state is JobState.RESIZING else None,
                record(job_id, state, at, message))[1]
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").allocation
                                  is not None and first_host not in job(s, "a").allocation.host_names
                                  and job(s, "a").throughput > 0, 90, "a running elsewhere")
            doing = "moving to " if kind is ChangeKind.MIGRATE else "resizing to "
            assert said and all(m.startswith(doing) for m in said), (kind, said)
        finally:
            await ctl.stop()  # jobs keep running on their hosts
        del store.try_set_state
        moved = store.job("a")
        assert moved.generation > gen_before
        assert JobState.RESIZING in [s for _, s in moved.job.history]
        second_host = job(snap, "a").allocation.host_names[0]

        again = Controller(hosts, store, options)
        await again.start()
        try:
            await wait_for(again, lambda s: job(s, "a").state is JobState.DONE, 150, "a done after restart")
        finally:
            await again.stop()
        assert store.job("a").generation == moved.generation, "re-adopted, not launched again"
        launches = [e for e in store.events(job_id="a", limit=500) if e.kind == "launch"]
        assert len(launches) == 2, [e.message for e in launches]
        (adopted,) = [e.message for e in store.events(job_id="a", limit=500) if e.kind == "adopt"]
        assert adopted.startswith(f"a generation {moved.generation}: found running (") and f"on {second_host}[" in adopted \
            and adopted.endswith("; carried on, not restarted") and " at step " in adopted, adopted

        rank0 = rank_agent_id("a", 0, store.store_id)
        before = _progress(next((tmp_path / f"w-{first_host}").glob(f"**/logs/{rank0}-g{gen_before}.log")))
        after = _progress(next((tmp_path / f"w-{second_host}").glob(f"**/logs/{rank0}-g{moved.generation}.log")))
        assert after[0]["step"] >= 60 and after[0]["step"] <= before[-1]["step"] + 5
        assert after[0]["loss"] < before[0]["loss"] * 0.8, "the loss carries on from the checkpoint"
        assert after[-1]["step"] == STEPS
        assert store.job("a").job.metrics == (("loss", after[-1]["loss"]), ("epoch", after[-1]["epoch"])), \
            "the metrics of its last progress line"

    asyncio.run(scenario())


def test_profiling_on_hosts_that_share_a_workdir_measures_every_type(tmp_path: Path) -> None:
    """The bundled local config, and hosts with an NFS home: all agents see one workdir.

    Profiling runs on every type at once; with one scratch checkpoint dir per job the newer run
    fenced the older (exit code 3, counted as a crash), so only one type was ever measured.
    """
    shared = tmp_path / "w-shared"
    path = write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.7)])
    path.write_text(path.read_text().replace(str(tmp_path / "w-fast"), str(shared))
                    .replace(str(tmp_path / "w-slow"), str(shared)))
    hosts = load_hosts(path)
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=STEPS))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and not ctl.executor.profiles, 90, "a plan")
            (profile,) = [p for p in snap.profiles if p.job_id == "a"]
            assert {c.config for c in profile.cells} == {"1"}, "one-GPU hosts: no 2- or 4-GPU cells to show"
        finally:
            await ctl.stop()

    try:
        asyncio.run(scenario())
    finally:
        kill_jobs_under(shared)
    assert {o[1] for o in store.observations("a")} == {"A100", "T4"}, "profiled on both types"
    assert store.job("a").crashes == 0, store.job("a").job.message
    assert not list((shared / "profiling").iterdir()), "profiling scratch dirs are removed after the runs"
    # what it cost, kept for `jobs a` (the GPU-seconds were nowhere)
    from heet_tui.control.profiling_cost import profiling_costs

    cost = profiling_costs(store)["a"]
    assert cost.runs == 2 and 0 < cost.gpu_s < 2 * 90, cost


def test_a_rejected_plan_stays_away_until_the_user_asks_to_plan_again(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan")
            await ctl.post(RejectPlan(first.plan_id))
            said = [e.message for e in store.events(limit=50) if e.kind == "plan"]
            assert f"plan #{first.plan_id} rejected" in said, "a rejection is logged as an approval is"
            for _ in range(5):  # rounds go by; the same plan is not offered again
                await ctl.round()
                assert ctl.hub.latest.plan_id is None
            with pytest.raises(ValueError, match="not pending"):
                await ctl.post(ApprovePlan(first.plan_id))
        finally:
            await ctl.stop()
        # nor by the next controller: the same plan came back as soon as it restarted
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
            assert await ctl.cluster.wait_settled(timeout=30)
            for _ in range(5):
                await ctl.round()
                assert ctl.hub.latest.plan_id is None
            assert "planning again (1 rejected plan(s)" in await ctl.post(Replan())
            again = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "the plan, proposed again")
            assert again.plan_id != first.plan_id and again.plan.allocations == first.plan.allocations
            assert job(again, "a").state is JobState.QUEUED, "nothing ran meanwhile"
        finally:
            await ctl.stop()

    asyncio.run(scenario())


def test_auto_approve_does_not_reapply_a_plan_that_just_failed_in_a_loop(tmp_path: Path, monkeypatch) -> None:
    # Seen with `run --auto-approve`: the same failing plan was approved and failed six times a second.
    from heet_tui.control.execution import StepFailed

    async def refuse(executor, store, change, at):
        raise StepFailed("GPUs [0] of only are still in use")

    monkeypatch.setattr("heet_tui.control.plan_apply.execute_change", refuse)
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.1, auto_approve=True))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50, max_gpus=1))))
            await wait_for(ctl, lambda s: any("1 failed" in n for n in s.notices), 60, "a failed plan")
            for _ in range(20):
                await ctl.round()
        finally:
            await ctl.stop()

    asyncio.run(scenario())
    approved = [e for e in store.events(limit=500) if e.kind == "plan" and "auto-approved" in e.message]
    assert len(approved) == 1, [e.message for e in approved]
    # why, in the job's own events and the plan's summary: it was in controller.log only
    assert "a: plan #1 failed to start it: GPUs [0] of only are still in use" in [e.message for e in store.events("a")]
    assert "plan #1: 0 step(s) done, 1 failed (a: GPUs [0] of only are still in use)" in [
        e.message for e in store.events(limit=500) if e.kind == "plan"]


def test_crashing_job_is_retried_then_failed_with_its_log_tail(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    crash = [sys.executable, "-c", "import sys; print('loading data: bad shard 7', flush=True); sys.exit(5)"]
    options = ControllerOptions(interval_s=0.3, execution=ExecOptions(max_retries=2, retry_backoff_s=0.2))

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "bad", steps=10, max_gpus=1, command=crash))))
            snap = await wait_for(ctl, lambda s: job(s, "bad").state is JobState.FAILED, 60, "bad to fail")
        bad = job(snap, "bad")
        assert "exit code 5" in bad.message and "bad shard 7" in bad.message
        assert any("bad shard 7" in line for line in bad.log_tail)
        assert store.job("bad").crashes == 3, "first try + 2 retries"

    asyncio.run(scenario())
    # each crash a retry followed said so, with its last line: the job read "queued", nothing more
    said = [e.message for e in store.events("bad", limit=200) if e.kind == "retry"]
    assert len(said) == 2 and all(m.endswith("; its last log line: loading data: bad shard 7") for m in said), said
    # its profiling runs crashed: no other event says so (a job's own run's crash has one of its own)
    assert said[0].startswith("bad: rank 0 on only ended with exit code 5; retry 1/2 in "), said[0]


def test_a_job_that_crashes_at_the_same_step_every_time_fails_instead_of_looping(tmp_path: Path) -> None:
    """Any second progress line reset the crash count, so a job that resumed from its checkpoint
    and hit the same bad batch at the same step was retried for ever. Only new ground resets it."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    script = tmp_path / "nan.py"
    script.write_text("import json, sys, time\nfor step in (6, 8, 10):\n"
                      "    print('@heet-progress ' + json.dumps({'step': step, 'samples': step * 32, 'samples_per_s': 50}))\n"
                      "    time.sleep(0.4)\n"
                      "print('loss is nan at step 10', flush=True)\nsys.exit(3)\n")
    options = fast_retries(2)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "nan", steps=100, max_gpus=1,
                                                   command=[sys.executable, str(script)]))))
            snap = await wait_for(ctl, lambda s: job(s, "nan").state is JobState.FAILED, 90, "nan to fail")
        assert "loss is nan at step 10" in job(snap, "nan").message
        assert store.job("nan").crashes == 3 and store.job("nan").job.steps_done == 10
        retries = [e.message for e in store.events("nan", limit=200) if e.kind == "retry"]
        crashes = [e.message for e in store.events("nan", limit=200) if e.kind == "crashed"]
        assert len(retries) == 2 and len(crashes) == 3, (retries, crashes)  # the third failed it
        assert all("exit code 3" in m for m in crashes) and not any("exit code" in m for m in retries), \
            "each crash said once: by the run's end, and its retry by this"

    run_and_clean(scenario, tmp_path)


def test_in_manual_mode_a_crashed_jobs_retry_waits_for_an_approval_and_says_so(tmp_path: Path) -> None:
    """It said "retry 1/2 in 2 s", and then nothing happened until someone approved a plan."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    command = training_with(tmp_path, "crash_unless_profiling", "if os.environ.get('HEET_PROFILING') != '1':\n    sys.exit(5)")
    options = ControllerOptions(interval_s=0.3, execution=ExecOptions(max_retries=2, retry_backoff_s=0.2))

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "c", steps=400, max_gpus=1,
                                                   command=command))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 90, "a proposed plan")
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: "retry 1/2" in job(s, "c").message, 60, "the crash")
            assert "exit code 5" in job(snap, "c").message
            assert "retry 1/2 in a plan for you to approve" in job(snap, "c").message
            await asyncio.sleep(1.5)  # well past the backoff: no restart without an approval
            assert store.job("c").crashes == 1 and job(ctl.hub.latest, "c").state is JobState.QUEUED

    run_and_clean(scenario, tmp_path)


def test_a_size_a_job_crashes_at_on_launch_is_left_out_and_the_job_runs_at_another(tmp_path: Path) -> None:
    """A script that cannot run on 2 GPUs (a batch it will not split so, memory that does not hold
    it): the plan gave it 2 GPUs three times over and it failed, although 1 GPU worked."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    command = training_with(tmp_path, "not_on_two", "if os.environ.get('WORLD_SIZE') == '2':\n    sys.exit(2)")
    options = ControllerOptions(interval_s=0.3, auto_approve=True,
                                execution=ExecOptions(max_retries=2, retry_backoff_s=0.2))

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "c", steps=150, max_gpus=2,
                                                   command=command))))
            await wait_for(ctl, lambda s: job(s, "c").state is JobState.DONE, 120, "c done")
            # its twin (same model and batch) is never launched at the size c could not run at
            await ctl.post(SubmitJob(str(write_job(tmp_path, "twin", steps=150, max_gpus=2,
                                                   command=command, model="c"))))
            await wait_for(ctl, lambda s: job(s, "twin").state is JobState.DONE, 120, "twin done")

    run_and_clean(scenario, tmp_path)
    launches = [e.message for e in store.events(limit=200) if e.kind == "launch"]
    assert "2xA100" in launches[0], "the test needs the first plan to give it both GPUs"
    assert all("1xA100" in m for m in launches[1:]), launches
    assert any(m.startswith("twin ") for m in launches) and store.job("twin").crashes == 0
    # kept in the store: a restarted controller tried such a size once more, a retry lost
    from heet_tui.control.crashed_sizes import CRASHED_SIZES, load_crashed_sizes

    assert load_crashed_sizes(store) == {"c": {("A100", 2)}}
    assert Controller(hosts, store, options).executor.crashed_sizes == {"c": {("A100", 2)}}, "read at start"
    store.set_setting(CRASHED_SIZES, "[not json")
    assert load_crashed_sizes(store) == {}, "unreadable: every size may be tried again"
    assert any("2xA100 crashed before its first report" in e.message for e in store.events(limit=200))


def test_progress_from_ranks_other_than_0_is_ignored_and_said_once(tmp_path: Path) -> None:
    """A script that ignores WORLD_SIZE: every GPU runs a whole copy, each printing progress."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    script = tmp_path / "not_distributed.py"
    script.write_text("import json, os, time\nrank = int(os.environ.get('RANK', '0'))\n"
                      "for s in range(1, int(os.environ['HEET_TARGET_STEPS']) + 1):\n    time.sleep(0.05)\n"
                      "    if s % 5 == 0:\n        print('@heet-progress ' + json.dumps({'step': s + 1000 * rank, "
                      "'samples': 32 * s, 'samples_per_s': 640.0}), flush=True)\n")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "nd", steps=100, max_gpus=2,
                                                   command=[sys.executable, str(script)]))))
            await wait_for(ctl, lambda s: job(s, "nd").state is JobState.DONE, 60, "nd done")

    run_and_clean(scenario, tmp_path)
    launches = [e.message for e in store.events(limit=200) if e.kind == "launch"]
    assert launches and "2xA100" in launches[0], "the test needs two ranks"
    warnings = [e.message for e in store.events(limit=200) if e.kind == "warning"]
    assert len(warnings) == len(launches) and "rank 1 prints progress lines too" in warnings[0]
    assert store.job("nd").job.steps_done == 100, "rank 1's steps (1000 ahead) never counted"


def test_restart_mid_plan_runs_only_the_steps_not_done(tmp_path: Path) -> None:
    """A controller killed after step 0 of a plan: the next one resumes at step 1, never redoes step 0."""
    from heet_tui.config.job_spec import load_job_spec
    from heet_tui.core.allocation import Allocation
    from heet_tui.core.plan import Plan

    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    for name in ("x", "y"):
        store.add_job(load_job_spec(write_job(tmp_path, name, steps=15, max_gpus=1)), 0.0)
    plan = Plan.build({}, {"x": Allocation.of("x", "A100", {"only": [0]}),
                           "y": Allocation.of("y", "A100", {"only": [1]})}, "heet", 0.0)
    plan_id = store.add_plan(plan)
    store.set_plan_status(plan_id, "approved", 1.0)
    store.start_applying(plan_id, plan.changes, 1.0)
    store.mark_step(plan_id, 0, "running", 1.0)
    store.mark_step(plan_id, 0, "done", 2.0, "pretend: launched before the crash")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, profile=False))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: job(s, "y").state is JobState.DONE, 60, "y done")
        finally:
            await ctl.stop()

    asyncio.run(scenario())
    assert [s.status for s in store.steps(plan_id)] == ["done", "done"]
    assert store.plan(plan_id).status == "applied"
    assert [e.job_id for e in store.events(limit=100) if e.kind == "launch"] == ["y"], "step 0 was not redone"
