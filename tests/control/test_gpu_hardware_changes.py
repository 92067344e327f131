"""Real GPU hosts as the driver reports them, mixed and failing: no GPU here, so the host's
``nvidia-smi`` answers from recordings (support/gpu_box.py) that a test switches mid-run.

Seen with imitated hardware: a job limited to A100s ran on the V100 of a mixed host; once the
driver stopped answering, a GPU someone else computed on read as free and a job went onto it;
after a GPU dropped off the bus the host still offered it, and a job was launched onto it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, started_controller, wait_for, write_job
from support.gpu_box import RECORDING, SECOND_GPU, recorded_gpu_box

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState

V100 = "2, GPU-3c4d5e6f-0000-4000-8000-00000000d00d, Tesla V100-SXM2-16GB, 16384, 0, 0\n"
# the recording after its gpu0 fell off the bus: the driver numbers the survivor 0
SURVIVOR = "0," + RECORDING.read_text().splitlines()[1].split(",", 1)[1] + "\n"
OPTIONS = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)


def _switchable_box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, Path]:
    """Host "box" whose GPU listing is ``listing`` while that file exists (the two recorded A100s
    otherwise), and whose nvidia-smi fails like a lost GPU while ``lost`` exists."""
    listing, lost = tmp_path / "listing.csv", tmp_path / "lost"
    prelude = (f'if [ -e {lost} ]; then echo "Unable to determine the device handle for GPU 0000:18:00.0: '
               f'GPU is lost" >&2; exit 15; fi\n'
               f'case "$1" in --query-gpu*) if [ -e {listing} ]; then cat {listing}; exit 0; fi ;; esac')
    hosts, apps = recorded_gpu_box(tmp_path, monkeypatch, prelude=prelude)
    return hosts, apps, listing, lost


def test_a_job_limited_to_one_type_runs_only_on_that_type_of_a_mixed_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hosts_path, _, listing, _ = _switchable_box(tmp_path, monkeypatch)
    listing.write_text(RECORDING.read_text() + V100)
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=3,
                                                   extra='gpu_types = ["A100"]\n'))))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            assert job(snap, "a").allocation.hosts == (("box", (0, 1)),), "the A100s, not the V100"
            assert [g.gpu_type for g in snap.hosts[0].gpus] == ["A100", "A100"]
            assert await asyncio.to_thread(main, ["--state", str(tmp_path / "state"), "status"]) == 0
            assert "left out: V100 (gpus = [2])" in capsys.readouterr().out

    run_and_clean(scenario, tmp_path)


def test_gpus_that_cannot_be_read_keep_their_users_and_get_no_new_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hosts_path, apps, _, lost = _switchable_box(tmp_path, monkeypatch)
    notebook = subprocess.Popen(["sleep", "600"], start_new_session=True)  # someone's, not heet's
    apps.write_text(f"{SECOND_GPU}, {notebook.pid}\n")
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].gpus and s.hosts[0].gpus[1].others, 60,
                           "the notebook seen on gpu1")
            lost.touch()
            snap = await wait_for(ctl, lambda s: s.hosts[0].launch_blocked, 30, "the host's GPUs unread")
            assert snap.hosts[0].launch_blocked.startswith("GPUs not read: nvidia-smi: ") and \
                "GPU is lost" in snap.hosts[0].launch_blocked
            assert snap.hosts[0].gpus[1].others, "the notebook is still there for all anyone knows"
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=2))))
            for _ in range(15):  # rounds every 0.3 s
                await asyncio.sleep(0.3)
                await ctl.publish()
                assert job(ctl.hub.latest, "a").state is JobState.QUEUED, "launched onto GPUs nobody can read"
            said = job(ctl.hub.latest, "a").message  # the reason first, not "every GPU it may use is taken"
            assert said.startswith("waiting for GPUs: nothing is launched on box now: GPUs not read: nvidia-smi: "), said
            assert "; elsewhere every GPU it may use is taken" in said, said
            assert await asyncio.to_thread(main, ["--state", str(tmp_path / "state"), "status"]) == 0
            assert "GPUs not read: nvidia-smi: " in capsys.readouterr().out
            lost.unlink()
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            assert job(snap, "a").allocation.hosts == (("box", (0,)),)

    try:
        run_and_clean(scenario, tmp_path)
    finally:
        notebook.kill()


def test_a_gpu_that_falls_off_the_bus_is_no_longer_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hosts_path, _, listing, _ = _switchable_box(tmp_path, monkeypatch)
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            await wait_for(ctl, lambda s: s.hosts and len(s.hosts[0].gpus) == 2, 60, "box with 2 GPUs")
            listing.write_text(SURVIVOR)
            snap = await wait_for(ctl, lambda s: len(s.hosts[0].gpus) == 1, 30, "the lost GPU dropped")
            (gpu,) = snap.hosts[0].gpus
            assert (gpu.index, gpu.uuid) == (0, SECOND_GPU) and gpu.utilization == 97.0
            assert [w[12:] for w in snap.hosts[0].warnings if w.startswith("at ")] == [
                "the GPUs changed since they were listed: gpu0 gone; gpu1 is now 0: listed them again"]
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=2))))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            assert job(snap, "a").allocation.hosts == (("box", (0,)),)

    run_and_clean(scenario, tmp_path)


def test_no_plan_gives_out_the_gpu_of_a_job_running_where_nothing_is_launched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The running job is left out of plans there, and its GPU was in no allocation and not
    reserved: a plan started another job on it, failed ("still in use"), and again every minute."""
    hosts_path, _, _, lost = _switchable_box(tmp_path, monkeypatch)
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            lost.touch()
            await wait_for(ctl, lambda s: s.hosts[0].launch_blocked, 30, "the host's GPUs unread")
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=100_000, max_gpus=1))))
            for _ in range(15):  # rounds every 0.3 s
                await asyncio.sleep(0.3)
            await ctl.publish()
            assert job(ctl.hub.latest, "b").state is JobState.QUEUED
            failed = [e.message for e in store.events(limit=200) if re.search(r"[1-9]\d* failed", e.message)]
            assert not failed, failed

    run_and_clean(scenario, tmp_path)


def test_gpus_renumbered_under_a_running_job_are_listed_again_once_it_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listed again at once, the job on old gpu1 (now 0) read as on gpu0's lost card and the plan
    stopped it, then put another job on its card."""
    from heet_tui.core.intents import CancelJob

    hosts_path, _, listing, _ = _switchable_box(tmp_path, monkeypatch)
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            spec = write_job(tmp_path, "a", steps=100_000, max_gpus=2)
            spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            listing.write_text(SURVIVOR)
            snap = await wait_for(ctl, lambda s: s.hosts[0].launch_blocked, 30, "launches blocked")
            assert snap.hosts[0].launch_blocked.startswith("the GPUs changed since they were listed: gpu0 gone") \
                and "listed again once no heet job runs here" in snap.hosts[0].launch_blocked
            await asyncio.sleep(2.0)
            await ctl.publish()
            assert len(ctl.hub.latest.hosts[0].gpus) == 2, "not listed again under the running job"
            assert job(ctl.hub.latest, "a").state is JobState.RUNNING, "not stopped"
            await ctl.post(CancelJob("a"))
            snap = await wait_for(ctl, lambda s: len(s.hosts[0].gpus) == 1, 60, "listed again")
            assert snap.hosts[0].gpus[0].uuid == SECOND_GPU

    run_and_clean(scenario, tmp_path)


def test_c_on_a_ready_host_whose_gpus_could_not_be_read_reads_them_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its driver failing at connect, the host was ready with no usable GPU, never read again once
    the driver was fixed, and c said "nothing to reconnect": an edit of its entry was the only way."""
    from heet_tui.core.intents import ConnectHost

    hosts_path, _, _, lost = _switchable_box(tmp_path, monkeypatch)
    lost.touch()
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, OPTIONS) as ctl:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].state.value == "ready", 60, "box ready")
            assert not ctl.hub.latest.hosts[0].gpus, "its GPUs could not be read"
            lost.unlink()  # the driver answers again
            said = await ctl.post(ConnectHost("box"))
            assert said == "box is connected: reading its GPUs again", said
            await wait_for(ctl, lambda s: len(s.hosts[0].gpus) == 2, 30, "box's two A100s")

    run_and_clean(scenario, tmp_path)
