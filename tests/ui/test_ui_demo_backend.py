"""The demo backend on the real simulator and scheduler: plans, approval, tweaks, submit, refusals."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from ui_fakes import profile_dir
from ui_support import run

from heet_tui.control.demo_backend import DemoBackend
from heet_tui.control.demo_inputs import demo_workload
from heet_tui.core.allocation import placement_key
from heet_tui.core.intents import (
    ApprovePlan,
    DrainHost,
    EditJob,
    RejectPlan,
    RetryJob,
    SetAutoApprove,
    SubmitJob,
)
from heet_tui.core.job import JobState
from heet_tui.core.sched_input import Constraints

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


async def next_with_plan(backend: DemoBackend, stream, tries: int = 50):
    for _ in range(tries):
        snap = await asyncio.wait_for(anext(stream), 30)
        if snap.plan_id is not None:
            return snap
    raise AssertionError("no plan was proposed")


def test_demo_plans_waits_for_approval_and_applies_it(tmp_path):
    async def scenario():
        backend = DemoBackend(profiles=profile_dir(tmp_path), jobs=4, round_wall_s=0.01)
        await backend.start()
        stream = backend.snapshots()
        try:
            snap = await next_with_plan(backend, stream)
            assert snap.mode == "demo" and len(snap.hosts) == 11 and sum(len(h.gpus) for h in snap.hosts) == 64
            assert not snap.auto_approve and snap.plan.changes
            # a first plan rests on profiling runs of one or a few GPUs: its other speeds are predictions,
            # and read as measured (no ±): 16 A100s at 86k/s ran at 51k
            assert any(p.after_spread != 0 for p in snap.plan.effect.jobs if p.throughput_after > 0)
            assert all(j.allocation is None for j in snap.jobs)  # nothing runs before the user says so
            # a job the pending plan starts has the plan's completion as its ETA (the Jobs screen's was blank)
            started = next(c.job_id for c in snap.plan.changes if c.after is not None)
            status = next(j for j in snap.jobs if j.id == started)
            assert status.eta_s == snap.plan.effect.for_job(started).completion_s is not None
            with pytest.raises(ValueError, match="no longer pending"):
                await backend.post(ApprovePlan(snap.plan_id + 99))
            # A tweak is previewed without being applied: the job is pinned to one T4.
            job = snap.plan.changes[0].job_id
            effect = await backend.preview(EditJob(snap.plan_id, job, Constraints(pinned_type="T4", fixed_count=1)))
            pred = effect.for_job(job)
            assert pred is not None and pred.throughput_after > 0
            assert snap.plan.effect.at is not None and effect.at >= snap.plan.effect.at, "dated on one clock"
            assert backend.sim.jobs[job].constraints == Constraints()
            # Applying the tweak re-plans with it: the job now gets exactly one T4.
            await backend.post(EditJob(snap.plan_id, job, Constraints(pinned_type="T4", fixed_count=1)))
            snap = await next_with_plan(backend, stream)
            tweaked = snap.plan.allocations[job]
            assert (tweaked.gpu_type, tweaked.num_gpus) == ("T4", 1)
            message = await backend.post(ApprovePlan(snap.plan_id))
            assert f"plan #{snap.plan_id} applied" in message
            for _ in range(20):
                after = await asyncio.wait_for(anext(stream), 30)
                if any(j.state is JobState.RUNNING for j in after.jobs):
                    break
            running = [j for j in after.jobs if j.allocation is not None]
            assert running
            assert sum(len(h.gpu_jobs) for h in after.hosts) == sum(j.allocation.num_gpus for j in running)
            assert after.profiles and any(c.measured for p in after.profiles for c in p.cells)
            assert any(not c.measured and c.uncertainty >= 0 for p in after.profiles for c in p.cells)
            # each running job's heat map has the cell it runs on, named: a spread one (888) was missing
            shown = {p.job_id: p for p in after.profiles}
            for j in running:
                where = (j.allocation.gpu_type, placement_key(j.allocation.placement))
                assert shown[j.id].runs_on == where and where in {(c.gpu_type, c.config) for c in shown[j.id].cells}
        finally:
            await backend.stop()

    run(scenario())


def test_reject_submit_and_refusals(tmp_path):
    async def scenario():
        backend = DemoBackend(profiles=profile_dir(tmp_path), jobs=2, round_wall_s=0.01)
        await backend.start()
        stream = backend.snapshots()
        try:
            snap = await next_with_plan(backend, stream)
            await backend.post(RejectPlan(snap.plan_id))
            assert backend.sim.pending_plan is None
            result = await backend.post(SubmitJob(str(EXAMPLES / "small-cnn.toml")))
            assert "submitted small-cnn" in result and "small-cnn" in backend.sim.jobs
            with pytest.raises(ValueError, match="simulated"):
                await backend.post(DrainHost("aws-0"))
            # it said "the demo cannot do RetryJob"
            with pytest.raises(ValueError, match="^the demo's jobs are simulated from a workload: they cannot be "
                                                 "retried or updated$"):
                await backend.post(RetryJob("small-cnn"))
            bad = tmp_path / "bad.toml"
            bad.write_text('name = "x"\n')
            with pytest.raises(ValueError, match="bad.toml"):
                await backend.post(SubmitJob(str(bad)))
            # a directory or a glob, as the prompt offers: "is a directory, expected a TOML file"
            folder = tmp_path / "sweep"
            folder.mkdir()
            for lr in ("a", "b"):
                (folder / f"{lr}.toml").write_text((EXAMPLES / "small-cnn.toml").read_text().replace(
                    'name = "small-cnn"', f'name = "cnn-{lr}"'))
            assert "submitted cnn-a, cnn-b" in await backend.post(SubmitJob(str(folder)))
            assert "submitted cnn-a-2" in await backend.post(SubmitJob(str(folder / "a*.toml")))
            await backend.post(SetAutoApprove(True))
            assert not backend.sim.manual_approval and backend.sim.pending_plan is None
        finally:
            await backend.stop()

    run(scenario())


def test_demo_workload_uses_the_shared_configurations():
    jobs = demo_workload(("cifar10", "imagenet"), 5)
    assert [j.application for j in jobs] == ["cifar10"] * 4 + ["imagenet"]
    assert jobs[0].num_replicas == 4 and jobs[0].batch_size == 2048 and jobs[1].time > jobs[0].time
    with pytest.raises(ValueError):
        demo_workload((), 3)


@contextlib.asynccontextmanager
async def started_demo(tmp_path, jobs: int):
    """A demo backend on the test profiles and its snapshot stream, stopped on the way out."""
    backend = DemoBackend(profiles=profile_dir(tmp_path), jobs=jobs, round_wall_s=0.01)
    await backend.start()
    try:
        yield backend, backend.snapshots()
    finally:
        await backend.stop()


def test_a_submitted_specs_gpu_types_hold_in_the_demo_and_its_target_is_said_to_be_the_models(tmp_path):
    """A T4-only job was planned on 2xA100, the tweak dialog offered every type, and a 300-step
    target ran as a whole cifar10 training, none of it said."""
    async def scenario():
        async with started_demo(tmp_path, 1) as (backend, stream):
            await next_with_plan(backend, stream)
            said = await backend.post(SubmitJob(str(EXAMPLES / "t4-only.toml")))
            assert "on T4" in said and "not to the spec's target" in said, said
            await backend.post(SetAutoApprove(True))
            for _ in range(200):
                snap = await asyncio.wait_for(anext(stream), 30)
                job = next(j for j in snap.jobs if j.id == "t4-only")
                assert job.gpu_types == ("T4",)
                if job.allocation is not None:
                    break
            assert job.allocation is not None and job.allocation.gpu_type == "T4", job.allocation

    run(scenario())


def test_rejecting_a_tweaked_plan_takes_the_tweak_back_as_the_help_says(tmp_path):
    async def scenario():
        async with started_demo(tmp_path, 2) as (backend, stream):
            snap = await next_with_plan(backend, stream)
            job = snap.plan.changes[0].job_id
            await backend.post(EditJob(snap.plan_id, job, Constraints(pinned_type="T4", fixed_count=1)))
            snap = await next_with_plan(backend, stream)
            said = await backend.post(RejectPlan(snap.plan_id))
            assert f"your edit(s) to {job} taken back" in said, said
            assert backend.sim.jobs[job].constraints == Constraints()

    run(scenario())


def test_a_tweak_with_no_plan_pending_proposes_one_as_the_controller_does(tmp_path):
    """In the demo a tweak made with no plan pending said "plan #0 is no longer pending" and Apply
    did nothing; the controller proposes a plan with the edit."""
    async def scenario():
        async with started_demo(tmp_path, 2) as (backend, stream):
            snap = await next_with_plan(backend, stream)
            await backend.post(ApprovePlan(snap.plan_id))
            job = snap.plan.changes[0].job_id
            edit = EditJob(0, job, Constraints(pinned_type="T4", fixed_count=1))  # the dialog's "no plan" id
            assert (await backend.preview(edit)).for_job(job) is not None
            assert "plan re-proposed" in await backend.post(edit)
            snap = await next_with_plan(backend, stream)
            tweaked = snap.plan.allocations[job]
            assert (tweaked.gpu_type, tweaked.num_gpus) == ("T4", 1)

    run(scenario())


def test_the_demo_runs_a_cluster_and_workload_of_the_users_own(tmp_path):
    """It showed the reference cluster and its own ten jobs alone: what a policy would do on the
    user's cluster and jobs could be asked of `heet-tui sim`, without plans to look at and approve."""
    cluster = tmp_path / "mine.toml"
    cluster.write_text('name = "mylab"\n\n[[node_types]]\nname = "aws"\nprofile = "aws"\ngpu_type = "T4"\n'
                       "gpus_per_node = 4\ncount = 2\n")
    workload = tmp_path / "mine.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\nfirst,0,cifar10,2,128\n"
                        "second,60,cifar10,4,256\n")

    async def scenario():
        backend = DemoBackend(profiles=profile_dir(tmp_path), round_wall_s=0.01, cluster=cluster, workload=workload)
        await backend.start()
        stream = backend.snapshots()
        try:
            snap = await next_with_plan(backend, stream)
            assert len(snap.hosts) == 2 and sum(len(h.gpus) for h in snap.hosts) == 8
            assert {h.gpu_type for h in snap.hosts} == {"T4"}
            assert {j.id for j in snap.jobs} <= {"first", "second"} and "first" in {j.id for j in snap.jobs}
        finally:
            await backend.stop()

    run(scenario())
    workload.write_text("name,time,application,num_replicas,batch_size\nx,0,cifar10,2,128\ny,5,nope,1,64\n")
    with pytest.raises(ValueError, match=rf"^{workload}:3: application 'nope' has no profile in "):
        DemoBackend(profiles=profile_dir(tmp_path / "again"), cluster=cluster, workload=workload)
    cluster.write_text('name = "mylab"\n\n[[node_types]]\nname = "aws"\nprofle = "aws"\n')
    with pytest.raises(ValueError, match=rf"^{cluster}:"):
        DemoBackend(profiles=profile_dir(tmp_path / "third"), cluster=cluster)


def test_demo_files_without_demo_are_a_usage_error(capsys):
    from heet_tui.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["--demo-workload", "w.csv"])
    assert exit_.value.code == 2 and "--demo-cluster and --demo-workload go with --demo" in capsys.readouterr().err


def test_a_demo_file_with_an_error_stops_before_any_screen_with_its_line(tmp_path, capsys, monkeypatch):
    """The TUI opened on the hosts file instead, "controller not available", the reason in a toast."""
    from heet_tui.cli.main import main

    monkeypatch.setenv("HEET_PROFILES", str(profile_dir(tmp_path)))
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n\n[[node_types]]\nname = "aws"\ngpus_per_node = four\n')
    assert main(["--demo", "--demo-cluster", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"heet-tui: --demo: {bad}:5:")
    work = tmp_path / "w.csv"
    work.write_text("name,time,application,num_replicas,batch_size\nx,0,nosuch,1,64\n")
    assert main(["--demo", "--demo-workload", str(work)]) == 2
    assert f"{work}:2: application 'nosuch' has no profile" in capsys.readouterr().err
