"""Auto-approve on a live controller: plans it now applies at once that it held before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from control_lab import (
    job,
    run_and_clean,
    running_past,
    started_controller,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import EditJob, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.sched_input import Constraints


def _with_a_running(tmp_path: Path, then: Callable[[Controller, Store], Awaitable[None]], profile: bool = False) -> None:
    """Job ``a`` running on the one GPU of a controller under auto-approve, then ``then``."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=profile)
        async with started_controller(hosts, store, options) as ctl:
            await running_past(ctl, write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000), "a", 5, 120)
            await then(ctl, store)

    run_and_clean(scenario, tmp_path)


def _said(store: Store, text: str) -> bool:
    return any(text in e.message for e in store.events(limit=50))


def test_an_urgent_job_takes_the_gpu_of_a_lower_priority_one(tmp_path: Path) -> None:
    """The stop of a and start of urgent "gained 0.0%", and the plan waited until a ended by itself."""
    async def then(ctl: Controller, store: Store) -> None:
        urgent = write_job(tmp_path, "urgent", steps=100_000, max_gpus=1, model="a", extra="priority = 5\n")
        await ctl.post(SubmitJob(str(urgent)))
        await wait_for(ctl, lambda s: job(s, "urgent").state is JobState.RUNNING, 90, "urgent running")
        assert job(ctl.hub.latest, "a").state is JobState.QUEUED
        assert _said(store, "auto-approved: it gives GPUs to urgent (priority 5) from a, of lower priority")

    _with_a_running(tmp_path, then)


def test_a_hold_made_on_the_plan_screen_is_carried_out(tmp_path: Path) -> None:
    """It waited, saying "it restarts a, started less than 120 s ago": the restart the user had asked for."""
    async def then(ctl: Controller, store: Store) -> None:
        await ctl.post(EditJob(ctl.hub.latest.plan_id or 0, "a", Constraints(held=True)))
        await wait_for(ctl, lambda s: job(s, "a").state is JobState.QUEUED, 60, "a held")
        assert _said(store, "auto-approved: it carries out your edit to a")

    _with_a_running(tmp_path, then)


def test_an_urgent_new_job_is_not_left_waiting_for_a_gpu_to_be_profiled_on(tmp_path: Path) -> None:
    """A new priority-5 job on a full cluster said "waiting to be profiled: no T4 GPU is idle" for as
    long as the priority-0 job ran: profiling takes idle GPUs only, and no plan was made for it."""
    async def then(ctl: Controller, store: Store) -> None:
        urgent = write_job(tmp_path, "urgent", steps=100_000, max_gpus=1, extra="priority = 5\n")
        await ctl.post(SubmitJob(str(urgent)))
        await wait_for(ctl, lambda s: job(s, "urgent").state is JobState.RUNNING, 120, "urgent running")
        assert job(ctl.hub.latest, "a").state is JobState.QUEUED
        # and a job of no higher priority waits for its profiling, as before
        await ctl.post(SubmitJob(str(write_job(tmp_path, "later", steps=100, max_gpus=1))))
        await wait_for(ctl, lambda s: job(s, "later").message.startswith("waiting to be profiled"), 60,
                       "later waiting to be profiled")

    _with_a_running(tmp_path, then, profile=True)
