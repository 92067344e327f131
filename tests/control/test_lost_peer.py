"""A spread job's host is lost: its ranks on the hosts still up are killed soon, and it is said.

They wait on the lost ranks in an all-reduce, where no SIGTERM reaches the script: they held
their GPUs for the job's whole stop grace, and their SIGKILL was said nowhere (the stop warning
of an ordinary stop, which would blame the script for ignoring SIGTERM, was left out)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.stop_grace import LOST_PEER_GRACE_S
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def _freeze_host(root: Path, host: str) -> list[int]:
    """The host cut off: its agent gone, its rank frozen mid-run (alive, answering nothing)."""
    state = root / f"w-{host}" / "hosts" / host
    groups = [j["pgid"] for j in json.loads((state / "agent-state.json").read_text())["jobs"] if j["state"] == "running"]
    for pgid in groups:
        os.killpg(pgid, signal.SIGSTOP)
    os.kill(int((state / "agent.pid").read_text()), signal.SIGKILL)
    return groups


def test_the_ranks_left_of_a_job_whose_host_is_lost_are_killed_soon_and_it_is_said(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("h1", "A100", 1, 1.0), ("h2", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.2, auto_approve=True, host_loss_grace_s=0.0, profile=False,
                                execution=ExecOptions(stop_grace_s=600.0))  # the job's own: no waiting it out
    frozen: list[int] = []

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            spec = write_job(tmp_path, "a", steps=100_000, max_gpus=2, extra="", every=1000)
            spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").progress > 0
                                  and store.job("a").job.steps_done >= 5, 90, "a running over both hosts")
            assert job(snap, "a").allocation.host_names == ("h1", "h2")
            frozen.extend(_freeze_host(tmp_path, "h2"))
            await wait_for(ctl, lambda s: any(e.kind == "warning" and "killed (SIGKILL)" in e.message
                                              for e in store.events("a", limit=100)),
                           LOST_PEER_GRACE_S + 60, "the kill of rank 0 said")
            said = next(e.message for e in store.events("a", limit=100) if "killed (SIGKILL)" in e.message)
            assert said.startswith(f"a generation 1: rank 0 on h1 killed (SIGKILL) {LOST_PEER_GRACE_S:g} s after the "
                                   "stop, once its host h2 lost ("), said
            assert "no stop signal ends" in said and "handle SIGTERM" not in said, said
        finally:
            for pgid in frozen:  # the fence of the agent back on h2 kills it; in case it has not
                for sig in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        os.killpg(pgid, sig)
                    except ProcessLookupError:
                        pass
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
