"""Over real SSH: one job trained across two hosts named by ``~/.ssh/config`` aliases.

Rank 0 runs on one host and rank 1 on the other; they meet at MASTER_ADDR, which must be an
address the *other host* reaches. The alias resolves on the login node only (here: nowhere,
since it is in no resolver), so MASTER_ADDR is the config's HostName (control/launch.py); with
the alias, rank 1 waited for a rendezvous that never came until the stall timeout.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from control.control_lab import job, training_with, wait_for, write_job
from support.e2e import FAST
from support.sshd import SshLab

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState

pytestmark = pytest.mark.slow


def test_a_two_gpu_job_spans_two_aliased_hosts_and_trains_to_its_target(lab: SshLab, tmp_path: Path) -> None:
    servers = [lab.add_host(name) for name in ("left", "right")]
    aliases = "".join(f"Host node-{s.name}\n  HostName {s.address}\n  Port {s.port}\n" for s in servers)
    lab.write_ssh_config(lab.user_key, extra=aliases)
    hosts_path = lab.hosts_toml([{"name": s.name, "address": f"node-{s.name}", "workdir": str(s.workdir),
                                  "emulate": {"gpu_type": "T4", "count": 1, "speed": 1.0}} for s in servers],
                                python=sys.executable)
    store = Store(tmp_path / "state")
    says_master = training_with(tmp_path, "wide", "print('rendezvous at', os.environ['MASTER_ADDR'], flush=True)")
    spec = write_job(tmp_path, "wide", steps=60, max_gpus=2, command=[*says_master, "--checkpoint-every", "20"])
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))  # only both hosts together fit

    async def scenario() -> None:
        ctl = Controller(load_hosts(hosts_path), store,
                         ControllerOptions(interval_s=0.3, auto_approve=True, profile=False, cluster=FAST))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "wide").state is JobState.RUNNING, 60, "wide to start")
            assert sorted(job(snap, "wide").allocation.host_names) == ["left", "right"]
            await wait_for(ctl, lambda s: job(s, "wide").state is JobState.DONE, 120, "wide to finish")
        finally:
            await ctl.stop()

    asyncio.run(scenario())
    rec = store.job("wide")
    assert (rec.job.steps_done, rec.generation, rec.crashes) == (60, 1, 0), "trained in one go, nothing retried"
    logs = {s.name: sorted(s.workdir.glob("**/logs/wide.r*.log")) for s in servers}
    ranks = {s: [p.name.split(".")[1] for p in found] for s, found in logs.items()}
    assert sorted(r for found in ranks.values() for r in found) == ["r0", "r1"] and all(ranks.values()), \
        f"one rank on each host: {ranks}"
    master = next(s for s in servers if ranks[s.name] == ["r0"])
    for found in logs.values():
        assert f"rendezvous at {master.address}\n" in found[0].read_text(), "the HostName, not the alias"
    launch = next(e.message for e in store.events("wide", limit=100) if e.kind == "launch")
    assert launch.endswith("2xT4 on left[0],right[0]"), launch
