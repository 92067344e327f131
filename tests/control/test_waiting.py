"""A queued job that no ready host can hold says why, and stops saying so when one can."""

from __future__ import annotations

import asyncio
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.control.waiting import why_waiting
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, Target, TargetKind
from heet_tui.core.sched_input import ClusterView, HostView


def _spec(lo: int = 1, types: tuple[str, ...] = ()) -> JobSpec:
    return JobSpec("j", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10), min_gpus=lo, max_gpus=8,
                   gpu_types=types)


def test_the_reason_names_what_is_missing_and_what_there_is() -> None:
    cluster = ClusterView((HostView("a", "A100", 2, (0, 1)), HostView("t", "T4", 4, (0, 1, 2, 3)),
                           HostView("d", "T4", 4, (0, 1, 2, 3), drained=True)))
    assert why_waiting(_spec(), cluster) is None
    assert why_waiting(_spec(types=("H100", "H200")), cluster) == (
        "cannot start yet: no ready host has H100 or H200 GPUs (ready and not drained: 2xA100, 4xT4)")
    assert why_waiting(_spec(lo=5), cluster) == (
        "cannot start yet: it needs at least 5 GPUs of one type; the most the ready hosts have is 4xT4")
    assert why_waiting(_spec(lo=3, types=("A100",)), cluster).endswith("is 2xA100")
    assert why_waiting(_spec(), ClusterView(())) == (
        "cannot start yet: no host is ready (see the Cluster screen, or heet-tui hosts check)")
    assert "no host is ready" in why_waiting(_spec(types=("T4",)), ClusterView(()))


def test_a_job_too_big_for_the_cluster_says_so_until_a_host_joins(tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "big", steps=10, max_gpus=3)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "big").message.startswith("cannot start yet"), 60,
                                  "the reason")
            assert job(snap, "big").message.endswith("the most the ready hosts have is 1xT4")
            await asyncio.sleep(1.0)  # five rounds: profiling it would take the GPU for a job that cannot run
            assert not [e for e in store.events() if e.kind == "profile"] and store.job("big").generation == 0
            write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 2, 1.0)])  # the file gains a host
            await wait_for(ctl, lambda s: not job(s, "big").message.startswith("cannot start yet"), 60,
                           "the reason gone once a host joined")
            await wait_for(ctl, lambda s: any(e.kind == "profile" for e in store.events()), 60, "profiling once it fits")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
