"""Plans the user rejected, or is reading while things change."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from control_lab import job, manual_controller, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import HostsFile, load_hosts
from heet_tui.control.store import Store
from heet_tui.core.intents import CancelJob, RejectPlan, SubmitJob
from heet_tui.core.job import LEFT_QUEUED, JobState


def _one_host(tmp_path: Path, gpus: int) -> tuple[HostsFile, Store]:
    return load_hosts(write_local_hosts(tmp_path, [("only", "A100", gpus, 1.0)])), Store(tmp_path / "state")


def test_a_pending_plan_made_from_what_changed_since_goes_when_the_rejected_one_comes_back(tmp_path: Path) -> None:
    """Jobs said "a plan that starts it was rejected; nothing is proposed until something changes"
    beside a pending plan that did start them: the round's plan was the rejected one again, and
    the older pending plan (made before the change) stayed up, approvable."""
    hosts, store = _one_host(tmp_path, 2)

    async def scenario() -> None:
        async with manual_controller(hosts, store, interval_s=0.2) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=50, max_gpus=1))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan starting a")
            await ctl.post(RejectPlan(first.plan_id))
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=50, max_gpus=1))))
            second = await wait_for(ctl, lambda s: s.plan_id is not None and "b" in s.plan.allocations, 30,
                                    "a plan starting a and b")
            await ctl.post(CancelJob("b"))  # what the pending plan was made from is gone
            snap = await wait_for(ctl, lambda s: job(s, "b").state is JobState.CANCELLED, 30, "b cancelled")
            for _ in range(3):
                await ctl.round()
            snap = ctl.hub.latest
            assert snap.plan_id is None, f"plan #{second.plan_id} (starting the cancelled b) is no longer pending"
            assert store.plan(second.plan_id).status == "superseded"
            assert job(snap, "a").message.startswith(LEFT_QUEUED) and "rejected" in job(snap, "a").message

    asyncio.run(scenario())


def test_a_plan_that_stands_while_jobs_run_shows_figures_of_now(tmp_path: Path) -> None:
    """A pending plan stands while what it was made from is unchanged, and kept the figures of
    when it was proposed: a shrink of a job 95% done still read "completes in 38 s, +108%"
    a minute and a half on, and was approvable as such."""
    from heet_tui.core.intents import ApprovePlan

    hosts, store = _one_host(tmp_path, 2)

    async def scenario() -> tuple[float, float]:
        async with manual_controller(hosts, store, interval_s=0.2) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=3000, max_gpus=1))))
            first = await wait_for(ctl, lambda s: s.plan_id is not None, 30, "a plan starting a")
            await ctl.post(ApprovePlan(first.plan_id))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").progress > 0.05,
                           90, "a running")
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=50, max_gpus=1))))
            shown = await wait_for(ctl, lambda s: s.plan_id is not None and "b" in s.plan.allocations
                                   and s.plan.effect.for_job("a") is not None, 30, "a plan starting b")
            early = shown.plan.effect.for_job("a").completion_s
            # the policy's near-ties flip (at lab scale, every half second): it now proposes no change,
            # and the plan on screen stands, as what it was made from is the same
            made = ctl.replan_from

            def no_change(inputs, cluster=None):
                plan = made(inputs, cluster)
                return plan and replace(plan, allocations={k: v for k, v in plan.allocations.items() if k != "b"},
                                        changes=())

            ctl.replan_from = no_change
            # and it counts down as it goes, not in 10% jumps (it stood still 45 s, then jumped)
            await wait_for(ctl, lambda s: 0.9 * early < s.plan.effect.for_job("a").completion_s < 0.97 * early, 60,
                           "the standing plan's figure a little down")
            later = await wait_for(ctl, lambda s: job(s, "a").progress > 0.6, 120, "a well on")
            assert later.plan_id == shown.plan_id, "the same plan stands: nothing it was made from changed"
            return early, later.plan.effect.for_job("a").completion_s

    early, late = asyncio.run(scenario())
    assert late < 0.7 * early, (early, late)
