"""Over real SSH: a dropped connection leaves the job running, and the reconnect re-adopts it.

The per-connection sshd is killed (what a network blip or a NAT timeout does to a session);
the listening sshd stays, so the controller reconnects at once. Before the host-loss grace
period (control/host_loss.py) the job was counted lost at the drop, its healthy process fenced
on reconnect, and it was relaunched from its last checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from control.control_lab import job, wait_for, write_job
from support.e2e import FAST
from support.sshd import SshLab

from heet_tui.cluster.loopback_sshd import _sshd_tree
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState

pytestmark = pytest.mark.slow


def test_a_dropped_ssh_connection_leaves_the_job_running_and_it_is_adopted(lab: SshLab, tmp_path: Path) -> None:
    server = lab.add_host("h1")
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(server, emulate={"gpu_type": "A100", "count": 1, "speed": 1.0})],
                                      python=sys.executable))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True, cluster=FAST, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=400, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").progress > 0.05,
                           120, "a to run")
            generation = store.job("a").generation
            sessions = [pid for pid in _sshd_tree(server.process.pid) if pid != server.process.pid]
            assert sessions, "the controller's SSH session"
            for pid in sessions:
                os.kill(pid, signal.SIGKILL)
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 180, "a to finish")
        finally:
            await ctl.stop()
        assert store.job("a").generation == generation, "adopted, never relaunched"
        assert store.job("a").crashes == 0
        messages = [e.message for e in store.events(limit=500)]
        assert any("host h1 is out" in m for m in messages) and any("host h1 is back" in m for m in messages)

    asyncio.run(scenario())
