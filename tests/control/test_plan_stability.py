"""A proposed plan stands while a person reads it: at lab scale running jobs' reports moved the
predictions every round, the policy's near-ties flipped (GPU 1 or 2 of like hosts), and a new plan
superseded the one on screen every half second, so that no approval by hand went through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.control.store_plans import KEEP_SUPERSEDED
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import ApprovePlan, Replan, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.plan import Plan
from heet_tui.core.snapshot import Snapshot


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


@contextlib.asynccontextmanager
async def _a_proposed(tmp_path: Path, gpus: int, wrapper) -> AsyncIterator[tuple[Controller, Any, Snapshot]]:
    """A controller without auto-approve on one host of ``gpus`` T4s, its policy wrapped in
    ``wrapper``, with a plan proposed for job a."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", gpus, 1.0)]))
    ctl = Controller(hosts, Store(tmp_path / "state"), ControllerOptions(interval_s=0.2, profile=False))
    ctl.policy = policy = wrapper(ctl.policy)
    await ctl.start()
    try:
        await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=400, max_gpus=1))))
        yield ctl, policy, await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan for a")
    finally:
        await ctl.stop()


async def _stands_while_asked_again(ctl: Controller, policy, plan_id: int) -> None:
    calls = policy.calls
    await asyncio.sleep(1.5)  # rounds go by, each with the policy's other answer
    assert policy.calls >= calls + 3, "the policy was asked again"
    assert ctl.hub.latest.plan_id == plan_id, "the plan on screen stands"


def test_a_pending_plan_stands_through_near_ties_until_what_it_was_made_from_changes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _a_proposed(tmp_path, 2, NearTies) as (ctl, near_ties, snap):
            await _stands_while_asked_again(ctl, near_ties, snap.plan_id)
            near_ties.avoid = dict(snap.plan.allocations["a"].hosts)["h"][0]  # from now on, the other GPU
            await ctl.post(Replan())  # p: asked for, a plan made now replaces it
            await wait_for(ctl, lambda s: s.plan_id is not None and s.plan_id != snap.plan_id, 30, "planned again")
            shown = ctl.hub.latest.plan_id
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=400, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id != shown and "b" in s.plan.allocations, 30,
                                  "a new plan with b")
            await asyncio.sleep(1.0)
            assert ctl.hub.latest.plan_id == snap.plan_id
            assert (await ctl.post(ApprovePlan(snap.plan_id))).startswith(f"plan #{snap.plan_id} approved")
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "b").state
                           is JobState.RUNNING, 60, "both running")

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
    async def scenario() -> None:
        async with _a_proposed(tmp_path, 1, Flickers) as (ctl, flickers, snap):
            await _stands_while_asked_again(ctl, flickers, snap.plan_id)
            assert [p.id for p in ctl.store.plans_with_status("proposed")] == [snap.plan_id]

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
