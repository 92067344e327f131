"""A host whose agent cannot record launches (its workdir's disk is full) is planned around:
its free GPUs are offered to no job, and the host says why, until the agent can write again."""

from __future__ import annotations

from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def test_a_host_that_cannot_record_launches_gets_none_until_it_can(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("full", "A100", 2, 1.0), ("ok", "T4", 1, 0.5)]))
    blocker = tmp_path / "w-full" / "hosts" / "full" / "agent-state.json.tmp"
    blocker.mkdir(parents=True)  # every save of the agent's job table fails, as on a full disk
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True))
        await ctl.start()
        try:
            snap = await wait_for(ctl, lambda s: any(h.name == "full" and h.launch_blocked for h in s.hosts), 60,
                                  "the full host says so")
            full = next(h for h in snap.hosts if h.name == "full")
            assert full.launch_blocked.startswith("cannot save its job table in") and "Is a directory" in \
                full.launch_blocked
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=2000, every=50))))
            snap = await wait_for(ctl, lambda s: job(s, "b").state is JobState.RUNNING, 90, "b running")
            assert [host for host, _ in job(snap, "b").allocation.hosts] == ["ok"]
            blocker.rmdir()
            await wait_for(ctl, lambda s: not any(h.launch_blocked for h in s.hosts), 60, "the host is back")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    said = [e.message for e in store.events(limit=200)]
    assert not [m for m in said if "refused" in m or "crashed" in m], said


def test_a_disk_that_fills_while_the_host_is_idle_refuses_the_launch_and_blocks_the_host(tmp_path: Path) -> None:
    """The launch failed part-way, as the agent's "internal error", counted as the job's crash: the
    job then kept off the host for good and said "every GPU it may use is taken"; the disk was
    named nowhere."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("full", "A100", 1, 1.0)]))
    blocker = tmp_path / "w-full" / "hosts" / "full" / "agent-state.json.tmp"
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].gpus, 60, "the host up")
            blocker.mkdir(parents=True)  # filled while idle: nothing has tried to write since
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=200, every=50))))
            snap = await wait_for(ctl, lambda s: job(s, "b").message.startswith(
                "waiting for GPUs: nothing is launched on full now: cannot save its job table"), 60, "b says why")
            assert job(snap, "b").state is JobState.QUEUED
            blocker.rmdir()  # space again: started at the next look, not after the failed plan's minute
            await wait_for(ctl, lambda s: job(s, "b").state is JobState.RUNNING, 30, "b running on full")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    said = [e.message for e in store.events(limit=200) if e.kind == "crashed"]
    assert not said, "the host's disk is not the job's crash"
    tries = [e.message for e in store.events(limit=200) if "failed to start it" in e.message]
    assert 1 <= len(tries) <= 2, tries  # not a loop of launches while the host said nothing yet
