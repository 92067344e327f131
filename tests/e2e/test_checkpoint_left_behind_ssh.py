"""Over real SSH: a job that went on elsewhere while its host was cut off takes back the checkpoint
that host returns with, when it is well ahead (control/reclaim.py).

Seen twice: the host's sshd died; after the grace period the job started again on another host
from step 0 (its checkpoint could not be copied off); the cut-off copy trained on to step 3,730;
when the host came back it was fenced ("those steps are lost") and its checkpoint written over.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from control.control_lab import job, running_past, wait_for, write_job
from support.e2e import FAST
from support.sshd import SshLab

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control import checkpoint_hosts, proposals
from heet_tui.control import controller as controller_module
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.job import JobState

pytestmark = pytest.mark.slow


def test_a_host_back_with_a_further_checkpoint_gives_it_to_its_job(lab: SshLab, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_hosts, "COPY_WAIT_S", 1.0)  # start behind soon: the case at hand
    for module in (proposals, controller_module):  # and try the failed plan again soon after
        monkeypatch.setattr(module, "RETRY_FAILED_PLAN_S", 1.0)
    servers = [lab.add_host(name) for name in ("h1", "h2")]
    emulate = {"gpu_type": "A100", "count": 1, "speed": 1.0}
    hosts = load_hosts(lab.hosts_toml([lab.entry_for(s, emulate=emulate) for s in servers], python=sys.executable))
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "a", steps=1_000_000, max_gpus=1, every=20, own_checkpoint_dir=False)
    options = ControllerOptions(interval_s=0.3, auto_approve=True, cluster=FAST, profile=False, host_loss_grace_s=2.0)

    away_said: list[dict[str, str]] = []
    real_away = checkpoint_hosts.CheckpointHosts.away

    def away(self, *args):
        away_said.append(real_away(self, *args))
        return away_said[-1]

    monkeypatch.setattr(checkpoint_hosts.CheckpointHosts, "away", away)

    async def scenario() -> int:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            first = await running_past(ctl, spec, "a", 60, 120)
            cut = next(s for s in servers if s.name == first)
            cut.kill()  # its sshd and sessions: the job trains on there, cut off
            await wait_for(ctl, lambda s: store.job("a").generation >= 2 and job(s, "a").state is JobState.RUNNING
                           and job(s, "a").allocation.host_names[0] != first, 120, "a started again elsewhere")
            # once counted lost, a plan starting it elsewhere said it starts without its checkpoint (for a
            # round or two: the start, the host's grace over, waits for it no more)
            assert any(said.get("a", "").startswith(f"{first} (") for said in away_said), away_said[-3:]
            generation = store.job("a").generation
            # its first report (from h2's nothing) before the host is back: under load torch's import
            # outlasted the 2 s, the run was stopped unreported, and nothing was "resumed behind"
            await wait_for(ctl, lambda s: getattr(ctl.executor.runs.get("a"), "reports", 0) >= 1, 120,
                           "a reporting elsewhere")
            await asyncio.sleep(2.0)
            cut.start()
            said = await wait_for(ctl, lambda s: any(e.kind == "checkpoint" and e.message.startswith(
                f"host {first} is back with a's checkpoint at step") for e in store.events("a", limit=200)), 120,
                "the checkpoint taken back")
            back = int(next(e.message for e in store.events("a", limit=200) if e.message.startswith(
                f"host {first} is back with")).split("at step ")[1].split(",")[0])
            # plans made until it restarts count the work left from there, not from the newer run's start
            assert store.job("a").job.steps_done >= back
            await asyncio.sleep(1.0)  # the cut-off copy, fenced, says how far it got: the furthest is taken
            step = max(int(e.message.split("at step ")[1].split(",")[0]) for e in store.events("a", limit=200)
                       if e.message.startswith(f"host {first} is back"))
            # its checkpoint is a few steps behind its last report (one every 20)
            await wait_for(ctl, lambda s: store.job("a").generation > generation
                           and store.job("a").job.steps_done >= step - 40, 120, "a going on from the checkpoint")
            assert said
            return step
        finally:
            await ctl.stop()

    step = asyncio.run(scenario())
    warned = [e.message for e in store.events("a", limit=300) if e.kind == "warning" and "resumed behind" in e.message]
    assert len(warned) == 1, warned  # the start from h2's nothing only: not the one from the checkpoint taken back
    assert not [e.message for e in store.events("a", limit=300) if "resumed ahead" in e.message], \
        "going on from the checkpoint taken back is not another job's checkpoint"
    restarted_at = int(warned[0].split("generation 2 reports step ")[1].split(",")[0])
    assert step - 40 > restarted_at, (step, restarted_at)
    back = [e.message for e in store.events("a", limit=300) if e.message.startswith("host ")
            and " is back with a's checkpoint" in e.message]
    # one figure, the fenced copy's: the host's ready came before its report, and the step known at
    # the loss was taken back (and named in the stop) before the copy's further one
    assert len(back) == 1 and f"at step {step}," in back[0], back
    fenced = [e.message for e in store.events("a", limit=300) if e.kind == "fence"]
    assert fenced and "those steps are lost" not in fenced[-1], fenced
