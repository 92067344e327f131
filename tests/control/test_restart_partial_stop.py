"""A controller restarted after some of a job's ranks were stopped (killed mid-resize).

Seen with `heet-tui run` killed while a plan moved a 4-rank job: rank 0 had its SIGTERM,
ranks 1-3 had not. The new agent reported rank 0's exit before its hello reply, the new
controller stopped the other ranks at once, while requests to the host still failed, and
counted them lost ("host slow is connecting") although they ran on.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.runtime import rank_agent_id
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def _pid(workdir: Path, agent_id: str, generation: int) -> int:
    state = json.loads(next(workdir.glob("**/agent-state.json")).read_text())
    return next(j["pid"] for j in state["jobs"] if j["job_id"] == agent_id and j["generation"] == generation
                and j["state"] != "exited")


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_rank_stopped_before_the_restart_gets_its_peers_stopped_not_lost(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("solo", "T4", 2, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        first = Controller(hosts, store, options)
        await first.start()
        try:
            await first.post(SubmitJob(str(write_job(tmp_path, "a", steps=100000, max_gpus=2))))
            await wait_for(first, lambda s: job(s, "a").state is JobState.RUNNING and job(s, "a").allocation
                           .num_gpus == 2 and store.job("a").job.steps_done >= 20, 90, "a running on 2 GPUs")
        finally:
            await first.stop()
        generation = store.job("a").generation
        workdir = tmp_path / "w-solo"
        rank0, rank1 = (_pid(workdir, rank_agent_id("a", r, store.store_id), generation) for r in (0, 1))
        store.try_set_state("a", JobState.RESIZING, time.time(), "resizing to 1xT4")  # what it had recorded
        os.killpg(rank0, signal.SIGTERM)  # what the killed controller had sent, to rank 0 only
        assert _gone(rank0, 30)

        again = Controller(hosts, store, options)
        await again.start()
        try:
            await wait_for(again, lambda s: any(e.kind == "interrupted" for e in store.events(job_id="a", limit=20)),
                           60, "the old generation judged")
            assert _gone(rank1, 40), "rank 1 was stopped"
        finally:
            await again.stop()
        (verdict,) = [e.message for e in store.events(job_id="a", limit=50) if e.kind == "interrupted"]
        assert "lost" not in verdict and "resize the previous controller began" in verdict, verdict

    run_and_clean(scenario, tmp_path)
