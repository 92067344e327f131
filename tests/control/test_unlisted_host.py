"""A host removed from the hosts file while no controller ran, with a job's run on it.

Seen: the restarted controller looked for the run for good, proposed moving the job, and on
approval could not stop the run ("unknown host") and launched a second copy elsewhere, both
training until the host was put back and the first fenced."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from control_lab import job, run_and_clean, running_past, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan
from heet_tui.core.job import JobState

OPTIONS = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False, execution=ExecOptions(stop_grace_s=1.0))


async def run_then_remove_its_host(path: Path, store: Store, spec: Path) -> str:
    """``a`` started by a first controller, which stops (``a`` trains on); its host is then taken
    out of the hosts file, as if edited while no controller ran. Returns the host."""
    full = path.read_text()
    first = Controller(load_hosts(path), store, OPTIONS)
    await first.start()
    try:
        host = await running_past(first, spec, "a", 5, 60)
    finally:
        await first.stop()  # a trains on
    head, *blocks = full.split("[[hosts]]")
    path.write_text(head + "".join("[[hosts]]" + b for b in blocks if f'name = "{host}"' not in b))
    return host


def test_a_run_on_a_host_gone_from_the_file_is_held_not_duplicated_and_adopted_when_it_is_back(
        tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("h1", "T4", 1, 1.0), ("h2", "T4", 1, 1.0)])
    full = path.read_text()
    store = Store(tmp_path / "state")
    options = OPTIONS
    spec = write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000)

    async def scenario() -> None:
        host = await run_then_remove_its_host(path, store, spec)
        again = Controller(load_hosts(path), store, options)
        await again.start()
        try:
            assert any(f"a ran on {host}, which is not in the hosts file" in n for n in again.notices)
            await asyncio.sleep(3.0)  # rounds with the other host free
            await again.publish()
            if (pending := again.hub.latest.plan_id) is not None:  # approved by hand, as the user did
                await again.post(ApprovePlan(pending))
                await asyncio.sleep(8.0)  # the stop waited out its grace, then the second copy started
            await again.publish()
            assert job(again.hub.latest, "a").state is JobState.RUNNING
            assert "not in the hosts file" in job(again.hub.latest, "a").message
            assert store.job("a").generation == 1 and not [e for e in store.events("a", limit=100)
                                                            if e.kind == "launch" and "generation 2" in e.message]
            path.write_text(full)  # put back: its run is found, still training
            await wait_for(again, lambda s: any(e.kind == "adopt" for e in store.events("a", limit=100)), 60,
                           "a found running on its host")
            assert store.job("a").generation == 1
            # found running, its host is no longer out: the message stayed to the job's end ("host out" in the TUI)
            await wait_for(again, lambda s: job(s, "a").message.startswith("running on"), 10, "the host-out message gone")
        finally:
            await again.stop()

    run_and_clean(scenario, tmp_path)


def test_a_job_done_on_its_rank_0_host_ends_though_a_peers_host_is_gone_from_the_file(tmp_path: Path) -> None:
    """Seen: rank 0 reached the target and both ranks exited, yet the job stayed "running" for as
    long as its rank 1's host was out of the hosts file."""
    path = write_local_hosts(tmp_path, [("h1", "T4", 1, 1.0), ("h2", "T4", 1, 1.0)])
    full = path.read_text()
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)
    spec = write_job(tmp_path, "wide", steps=400, max_gpus=2, every=1000)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))

    async def scenario() -> None:
        first = Controller(load_hosts(path), store, options)
        await first.start()
        try:
            await running_past(first, spec, "wide", 5, 90)
            (rank0, _), (peer, _) = job(first.hub.latest, "wide").allocation.hosts
        finally:
            await first.stop()
        head, *blocks = full.split("[[hosts]]")
        path.write_text(head + "".join("[[hosts]]" + b for b in blocks if f'name = "{peer}"' not in b))
        again = Controller(load_hosts(path), store, options)
        await again.start()
        try:
            snap = await wait_for(again, lambda s: job(s, "wide").state is JobState.DONE, 120, "wide done")
            assert job(snap, "wide").message.startswith("target reached"), job(snap, "wide").message
        finally:
            await again.stop()

    run_and_clean(scenario, tmp_path)


def test_a_job_found_running_by_a_later_controller_loses_its_host_out_message(tmp_path: Path) -> None:
    """Removed from the file while no controller ran, then put back before the next start: the job
    was found running ("carried on, not restarted") but kept "its host h1 is out (not in the hosts
    file ...)" to its end, and the TUI showed it as "host out"."""
    path = write_local_hosts(tmp_path, [("h1", "T4", 1, 1.0), ("h2", "T4", 1, 1.0)])
    full = path.read_text()
    store = Store(tmp_path / "state")
    options = replace(OPTIONS, auto_approve=False)
    spec = write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000)

    async def scenario() -> None:
        host = await run_then_remove_its_host(path, store, spec)
        second = Controller(load_hosts(path), store, options)
        await second.start()
        try:
            await wait_for(second, lambda s: "not in the hosts file" in job(s, "a").message, 20, "a's host said out")
        finally:
            await second.stop()
        path.write_text(full)
        third = Controller(load_hosts(path), store, options)
        await third.start()
        try:
            await wait_for(third, lambda s: any(e.kind == "adopt" for e in store.events("a", limit=100)), 60,
                           "a found running on its host")
            await wait_for(third, lambda s: job(s, "a").message == f"running on 1xT4 on {host}[0]", 10,
                           "the host-out message gone")
        finally:
            await third.stop()

    run_and_clean(scenario, tmp_path)
