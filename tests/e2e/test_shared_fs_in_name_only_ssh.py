"""Over real SSH: hosts the hosts file says share a filesystem (``shared_fs``, true unless set)
but that do not. Seen: a job moved off a drained host restarted from step 10 on the other,
its checkpoint at step 1,043 left on the first, and the warning blamed the script."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from control.control_lab import job, running_past, wait_for, write_job
from support.e2e import FAST
from support.sshd import SshLab, kill_jobs_under

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.checkpoint_copy import sees_same_files
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import DrainHost
from heet_tui.core.job import JobState

pytestmark = pytest.mark.slow


def test_a_checkpoint_the_next_host_does_not_see_is_copied_though_the_hosts_file_says_shared(
        lab: SshLab, tmp_path: Path) -> None:
    servers = [lab.add_host(name) for name in ("h1", "h2")]
    emulate = {"gpu_type": "A100", "count": 1, "speed": 1.0}
    # one workdir name, which each host reads in its own home: not one filesystem
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(s, emulate=emulate, workdir="~/.heet") for s in servers],
                                      python=sys.executable))
    assert all(h.shared_fs for h in hosts.hosts)
    shared = tmp_path / "really-shared"
    shared.mkdir()
    (shared / "checkpoint.pt").write_bytes(b"x" * 100)
    assert asyncio.run(sees_same_files(hosts.host("h1"), hosts.host("h2"), str(shared), hosts.ssh_config, FAST))
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "mover", steps=1_000_000, max_gpus=1, every=20, own_checkpoint_dir=False)
    options = ControllerOptions(interval_s=0.3, auto_approve=True, cluster=FAST, profile=False)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            first = await running_past(ctl, spec, "mover", 60, 120)
            before = store.job("mover").job.steps_done
            await ctl.post(DrainHost(first))
            await wait_for(ctl, lambda s: store.job("mover").generation >= 2 and job(s, "mover").state
                           is JobState.RUNNING and job(s, "mover").allocation.host_names[0] != first, 120,
                           "mover moved")
            run = ctl.executor.runs["mover"]
            await wait_for(ctl, lambda s: run.reports >= 2, 120, "mover reporting from the new host")
            assert store.job("mover").job.steps_done >= before - 20, "it went on from its checkpoint (one every 20)"
        finally:
            await ctl.stop()

    try:
        asyncio.run(scenario())
    finally:
        for server in servers:
            kill_jobs_under(server.home / ".heet")
    events = store.events("mover", limit=300)
    assert not [e.message for e in events if "resumed behind" in e.message], "it went on from its checkpoint"
    warned = [e.message for e in events if e.kind == "warning" and "does not see the checkpoint" in e.message]
    assert len(warned) == 1 and "set shared_fs = false" in warned[0], warned
    assert [e for e in events if e.kind == "checkpoint" and "copied" in e.message]
