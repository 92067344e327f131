"""A plan the user rejected, made again after something changed, while another plan is pending."""

from __future__ import annotations

import asyncio
from pathlib import Path

from control_lab import job, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import CancelJob, RejectPlan, SubmitJob
from heet_tui.core.job import LEFT_QUEUED, JobState


def test_a_pending_plan_made_from_what_changed_since_goes_when_the_rejected_one_comes_back(tmp_path: Path) -> None:
    """Jobs said "a plan that starts it was rejected; nothing is proposed until something changes"
    beside a pending plan that did start them: the round's plan was the rejected one again, and
    the older pending plan (made before the change) stayed up, approvable."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, profile=False))
        await ctl.start()
        try:
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
        finally:
            await ctl.stop()

    asyncio.run(scenario())
