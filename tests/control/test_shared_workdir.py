"""Two state stores (two users on one login, or one user with two ``--state`` dirs) whose
controllers reach a host through one agent workdir: while one serves it, the other is refused
there. Seen: the refused controller counted the host lost after its grace period, relaunched
its job elsewhere and then fenced the original run, which had trained on the whole time."""

from __future__ import annotations

import asyncio
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.host import HostState
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def test_a_host_another_stores_controller_serves_holds_this_stores_job_until_it_is_back(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 2, 1.0)]))
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False, host_loss_grace_s=1.0)
    alice, bob = tmp_path / "alice", tmp_path / "bob"

    async def scenario() -> None:
        first = Controller(hosts, Store(alice), options)
        await first.start()
        try:
            await first.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(first, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
        finally:
            await first.stop()  # a keeps training on h
        other = Controller(hosts, Store(bob), options)
        await other.start()
        again = None
        try:
            await wait_for(other, lambda s: s.hosts[0].state is HostState.READY, 60, "bob's controller on h")
            again = Controller(hosts, Store(alice), options)
            await again.start()
            snap = await wait_for(again, lambda s: s.hosts[0].state is HostState.AGENT_ERROR, 30, "alice refused")
            assert "managed by another heet-tui controller" in snap.hosts[0].message
            await asyncio.sleep(3.0)  # rounds past the grace period
            await again.publish()
            assert not [e for e in again.store.events("a", limit=100) if e.kind == "host-lost"]
            assert job(again.hub.latest, "a").state is JobState.RUNNING, job(again.hub.latest, "a").message
        finally:
            await other.stop()
        try:
            snap = await wait_for(again, lambda s: s.hosts[0].state is HostState.READY, 60, "alice back on h")
            await asyncio.sleep(1.0)
            assert not [e for e in again.store.events(limit=200) if e.kind == "fence"], "the run trained on: kept"
            assert job(again.hub.latest, "a").state is JobState.RUNNING
        finally:
            await again.stop()

    run_and_clean(scenario, tmp_path)
