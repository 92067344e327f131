"""A proposed plan stands while a person reads it: at lab scale running jobs' reports moved the
predictions every round, the policy's near-ties flipped (GPU 1 or 2 of like hosts), and a new plan
superseded the one on screen every half second, so that no approval by hand went through."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.control.store_plans import KEEP_SUPERSEDED
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import ApprovePlan, Replan, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.plan import Plan


class NearTies:
    """The policy, with job ``a``'s start flipping between two like GPUs at every call while it is alone."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0
        self.avoid: int | None = None  # set: the GPU it must not give (from then on, the other one)

    def plan(self, cluster, views, now):
        plan = self.inner.plan(cluster, views, now)
        self.calls += 1
        queued = {v.id for v in views if v.current is None}
        if set(plan.allocations) != {"a"} or "a" not in queued:
            return plan  # alone on the host: either GPU will do
        gpu = self.calls % 2 if self.avoid is None else 1 - self.avoid
        allocations = dict(plan.allocations) | {"a": Allocation.of("a", "T4", {"h": [gpu]})}
        return replace(plan, allocations=allocations)


def test_a_pending_plan_stands_through_near_ties_until_what_it_was_made_from_changes(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        ctl.policy = near_ties = NearTies(ctl.policy)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=400, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan for a")
            shown, calls = snap.plan_id, near_ties.calls
            await asyncio.sleep(1.5)  # rounds go by, each with the other GPU for a
            assert near_ties.calls >= calls + 3, "the policy was asked again"
            assert ctl.hub.latest.plan_id == shown, "the plan on screen stands"
            near_ties.avoid = dict(snap.plan.allocations["a"].hosts)["h"][0]  # from now on, the other GPU
            await ctl.post(Replan())  # p: asked for, a plan made now replaces it
            await wait_for(ctl, lambda s: s.plan_id is not None and s.plan_id != shown, 30, "planned again")
            shown = ctl.hub.latest.plan_id
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=400, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id != shown and "b" in s.plan.allocations, 30,
                                  "a new plan with b")
            await asyncio.sleep(1.0)
            assert ctl.hub.latest.plan_id == snap.plan_id
            assert (await ctl.post(ApprovePlan(snap.plan_id))).startswith(f"plan #{snap.plan_id} approved")
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "b").state
                           is JobState.RUNNING, 60, "both running")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


class Flickers:
    """The policy, between starting job ``a`` and leaving everything as it is, call after call."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def plan(self, cluster, views, now):
        plan = self.inner.plan(cluster, views, now)
        self.calls += 1
        if self.calls % 2 or "a" not in plan.allocations:
            return plan
        return replace(plan, allocations={j: a for j, a in plan.allocations.items() if j != "a"})


def test_a_pending_plan_stands_through_a_near_tie_with_no_change(tmp_path: Path) -> None:
    """Seen: a plan being read vanished, with no event, when a round's plan came out empty."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        ctl.policy = flickers = Flickers(ctl.policy)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=400, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan for a")
            calls = flickers.calls
            await asyncio.sleep(1.5)
            assert flickers.calls >= calls + 3, "the policy was asked again"
            assert ctl.hub.latest.plan_id == snap.plan_id, "the plan being read stands"
            assert [p.id for p in store.plans_with_status("proposed")] == [snap.plan_id]
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_only_the_newest_superseded_plans_are_kept(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    applied = store.add_plan(Plan({}, (), policy="heet"))
    store.set_plan_status(applied, "applied", 1.0)
    ids = [store.add_plan(Plan({}, (), policy="heet", created_at=float(i))) for i in range(KEEP_SUPERSEDED + 20)]
    kept = [p.id for p in store.plans_with_status("superseded")]
    assert kept == ids[-KEEP_SUPERSEDED - 1:-1], "the newest superseded ones, the pending one apart"
    assert [p.id for p in store.plans_with_status("proposed")] == [ids[-1]]
    assert [p.id for p in store.plans_with_status("applied")] == [applied], "what was applied stays"
    assert store.add_plan(Plan({}, (), policy="heet")) == ids[-1] + 1, "ids are never reused"
