"""While an approved plan starts a queued job (a checkpoint copy first may take a while), the job
and `heet-tui plan` say so: it read "in plan #6 (start on 1xT4), waiting for approval" and "waiting
with nothing proposed" for the 32 s of a copy over a slow link."""

from __future__ import annotations

import asyncio
from pathlib import Path

from heet_tui.control import plan_apply
from heet_tui.control.execution import StepFailed
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind
from heet_tui.core.plan import Plan
from heet_tui.core.snapshot import JobStatus, Snapshot
from heet_tui.core.waiting import why_waiting


def test_a_job_being_started_says_so_and_a_failed_start_says_why(tmp_path: Path, monkeypatch) -> None:
    store = Store(tmp_path / "state")
    for name in ("a", "b"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
        store.set_state(name, JobState.QUEUED, 1.0, "in plan #6 (start on 1xT4), waiting for approval")
    seen = {}

    async def execute(executor, store_, change, now):
        seen[change.job_id] = store_.job(change.job_id).job.message
        if change.job_id == "b":
            raise StepFailed("copying the checkpoint failed: timed out")
        return "launched"

    monkeypatch.setattr(plan_apply, "execute_change", execute)
    plan = Plan.build({}, {n: Allocation.of(n, "T4", {"t": [i]}) for i, n in enumerate("ab")}, "heet", 0.0)
    plan_id = store.add_plan(plan)
    store.start_applying(plan_id, plan.changes, 2.0)
    for step in store.steps(plan_id):
        asyncio.run(plan_apply._run_step(None, store, plan_id, step, lambda: 3.0))
    assert seen["a"].startswith(f"plan #{plan_id} approved: starting on 1xT4 on t[0]"), seen
    assert store.job("b").job.message == "plan step failed: copying the checkpoint failed: timed out"

    waiting = JobStatus("a", "a", JobState.QUEUED, "m", None, 0.0, 0.0, None, 0, 0.0, 1, 1, message=seen["a"])
    said = why_waiting(Snapshot(now=4.0, hosts=(), jobs=(waiting,)))
    assert "a: being started by the approved plan" in said and "nothing proposed" not in said, said


def test_an_unexpected_error_in_one_step_fails_that_step_and_not_its_siblings(tmp_path: Path, monkeypatch) -> None:
    """A store error in one step (a compromised host's huge generation) cancelled the step beside
    it, whose job had been launched already: it trained to its end but stayed "queued"."""
    store = Store(tmp_path / "state")
    for name in ("a", "b"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
        store.set_state(name, JobState.QUEUED, 1.0, "waiting")
    finished = []

    async def execute(executor, store_, change, now):
        if change.job_id == "a":
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        await asyncio.sleep(0.2)
        finished.append(change.job_id)
        return "launched"

    monkeypatch.setattr(plan_apply, "execute_change", execute)
    plan = Plan.build({}, {n: Allocation.of(n, "T4", {"t": [i]}) for i, n in enumerate("ab")}, "heet", 0.0)
    plan_id = store.add_plan(plan)
    store.set_plan_status(plan_id, "approved", 1.5)
    from types import SimpleNamespace

    summary = asyncio.run(plan_apply.apply_plan(SimpleNamespace(runs={}), store, plan_id, lambda: 3.0))
    assert finished == ["b"], "the sibling step ran to its end"
    assert summary.startswith(f"plan #{plan_id}: 1 step(s) done, 1 failed (a: internal error (OverflowError"), summary


def test_a_snapshot_says_how_many_running_jobs_the_plan_being_applied_restarts(tmp_path: Path) -> None:
    """The Plan screen said "jobs stop, save a checkpoint and start again" while a plan only started
    queued jobs: the snapshot named the plan being applied and nothing of what it does."""
    from control_lab import write_local_hosts

    from heet_tui.config.hosts_file import load_hosts
    from heet_tui.control.controller import Controller, ControllerOptions
    from heet_tui.control.snapshot_build import build_snapshot

    store = Store(tmp_path / "state")
    ctl = Controller(load_hosts(write_local_hosts(tmp_path, [("t", "T4", 3, 1.0)])), store, ControllerOptions())
    starts = Plan.build({}, {"a": Allocation.of("a", "T4", {"t": [0]})}, "heet", 0.0)
    grows = Plan.build({"a": Allocation.of("a", "T4", {"t": [0]})}, {"a": Allocation.of("a", "T4", {"t": [0, 1]}),
                                                                     "b": Allocation.of("b", "T4", {"t": [2]})},
                       "heet", 0.0)

    async def applying(plan: Plan) -> Snapshot:
        release = asyncio.Event()

        async def held(plan_id: int) -> None:  # the steps take their time: the snapshot is taken meanwhile
            await release.wait()

        ctl._apply = held
        plan_id = store.add_plan(plan)
        ctl.start_apply(plan_id)
        snap = build_snapshot(ctl)
        assert snap.applying_plan == plan_id
        release.set()
        await ctl.applying
        assert build_snapshot(ctl).applying_plan is None
        return snap

    assert asyncio.run(applying(starts)).applying_restarts == 0
    assert asyncio.run(applying(grows)).applying_restarts == 1
