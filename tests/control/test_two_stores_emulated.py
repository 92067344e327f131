"""Two state stores (two users, or two --state) on one host with emulated GPUs: each sees the
other's jobs on them and keeps off. Emulated GPUs have no driver to list their users, and both
controllers put jobs on every GPU of the shared host, neither saying a word; a job the other
started after this controller connected was seen at no heartbeat."""

from __future__ import annotations

from pathlib import Path

from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, SubmitJob
from heet_tui.core.job import JobState


def test_a_job_of_another_store_started_later_is_seen_and_kept_off(tmp_path: Path) -> None:
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    hosts_a = load_hosts(write_local_hosts(tmp_path / "A", [("h", "T4", 2, 1.0)]))
    hosts_b = load_hosts(write_local_hosts(tmp_path / "B", [("h", "T4", 2, 1.0)]))  # its own workdir

    async def scenario() -> None:
        async with manual_controller(hosts_b, Store(tmp_path / "B" / "state")) as b, \
                manual_controller(hosts_a, Store(tmp_path / "A" / "state")) as a:
            await wait_for(b, lambda s: s.hosts and s.hosts[0].state.value == "ready", 60, "b connected")
            await a.post(SubmitJob(str(write_job(tmp_path / "A", "ja", steps=100_000, max_gpus=1, every=1000))))
            snap = await wait_for(a, lambda s: s.plan_id is not None, 60, "a's plan")
            await a.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(a, lambda s: job(s, "ja").state is JobState.RUNNING, 60, "ja running")
            (held,) = snap.plan.allocations["ja"].gpus_on("h") if snap.plan else job(snap, "ja").allocation.gpus_on("h")
            # b, connected before ja started, sees it at a heartbeat
            seen = await wait_for(b, lambda s: any(g.index == held and g.others for g in s.hosts[0].gpus), 30,
                                  "ja seen by the other store")
            (gpu,) = [g for g in seen.hosts[0].gpus if g.index == held]
            assert any("ja.r0." in who for who in gpu.others), gpu.others
            await b.post(SubmitJob(str(write_job(tmp_path / "B", "jb", steps=100_000, max_gpus=2, every=1000))))
            snap = await wait_for(b, lambda s: s.plan_id is not None and "jb" in s.plan.allocations, 60, "b's plan")
            assert held not in snap.plan.allocations["jb"].gpus_on("h"), "kept off ja's GPU"

    run_and_clean(scenario, tmp_path)
