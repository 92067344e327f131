"""Over real SSH: a job cancelled while its host is out of reach says its process runs on there
until the host is back, and the host's return stops it.

The job was marked "cancelled" at once while its training went on, holding the GPU, until its
host came back and fenced it; nothing said so.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from control.control_lab import job, wait_for, write_job
from support.e2e import FAST
from support.sshd import SshLab

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import CancelJob, SubmitJob
from heet_tui.core.job import JobState

pytestmark = pytest.mark.slow

SAID = "; its run on h1 (out of reach) is stopped when the host is back"


def test_a_cancel_while_the_host_is_out_says_the_process_is_stopped_when_it_is_back(lab: SshLab,
                                                                                   tmp_path: Path) -> None:
    server = lab.add_host("h1")
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(server, emulate={"gpu_type": "A100", "count": 2, "speed": 1.0})],
                                      python=sys.executable))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, cluster=FAST, profile=False, host_loss_grace_s=3.0)

    async def scenario() -> str:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            for name in ("held", "lost"):
                await ctl.post(SubmitJob(str(write_job(tmp_path, name, steps=100_000, max_gpus=1))))
            await wait_for(ctl, lambda s: all(job(s, n).state is JobState.RUNNING and job(s, n).progress > 0
                                              for n in ("held", "lost")), 120, "both to run")
            server.kill()  # sshd and its sessions: the jobs train on, out of reach
            await wait_for(ctl, lambda s: s.hosts[0].state.value != "ready", 30, "h1 out")
            await ctl.post(CancelJob("held"))  # its run is kept for the grace period
            await wait_for(ctl, lambda s: job(s, "lost").state is JobState.QUEUED, 30, "lost counted lost")
            after_grace = await ctl.post(CancelJob("lost"))
            await wait_for(ctl, lambda s: job(s, "held").state is JobState.CANCELLED, 30, "held cancelled")
            server.start()
            await wait_for(ctl, lambda s: s.hosts[0].state.value == "ready", 60, "h1 back")
            await wait_for(ctl, lambda s: sum("stopped stale" in e.message for e in store.events(limit=500)) >= 2,
                           60, "both copies fenced")
            return after_grace
        finally:
            await ctl.stop()

    after_grace = asyncio.run(scenario())
    assert after_grace == f"cancelled lost{SAID}", after_grace
    for name in ("held", "lost"):
        assert store.job(name).job.state is JobState.CANCELLED
        # once its run is stopped, the message no longer says it is still to be (it did, for good)
        assert store.job(name).job.message == "cancelled", store.job(name).job.message
    fenced = [e.message for e in store.events(limit=500) if "stopped stale" in e.message]
    assert not any("lost" in m.split(":", 1)[-1] or "out of reach" in m for m in fenced), fenced
    held = next(m for m in fenced if m.startswith("stopped stale held."))
    step = int(held.split("run on to step ")[1].split(",")[0])
    assert "(its checkpoint there keeps them for a retry)" in held, held
    assert store.job("held").job.steps_done == step, "a retry says how far it got: where its checkpoint is"
