"""A GPU that a process heet did not start computes on is kept out of plans and shown.

On a shared lab host people also run notebooks on the GPUs by hand; heet saw such a GPU as
free and launched onto it. No GPU here: the host's ``nvidia-smi`` is a recorded answer (two
A100s) whose compute-apps listing names a real process of this machine, as the driver would.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, started_controller, wait_for, write_job
from support.gpu_box import SECOND_GPU, recorded_gpu_box

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def test_a_gpu_someone_else_computes_on_is_left_alone_until_they_are_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hosts_path, apps = recorded_gpu_box(tmp_path, monkeypatch)
    notebook = subprocess.Popen(["sleep", "600"], start_new_session=True)  # someone's, not heet's
    apps.write_text(f"{SECOND_GPU}, {notebook.pid}\n")
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=2))))
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 90, "a running")
            (box,) = snap.hosts
            me = pwd.getpwuid(os.getuid()).pw_name
            assert box.gpu_type == "A100" and box.gpus[1].others == (f"pid {notebook.pid} sleep ({me})",), box.gpus
            assert job(snap, "a").allocation.hosts == (("box", (0,)),), "only the GPU nobody else uses"
            assert not box.gpus[0].others, "a heet job's own GPU is its own"
            assert await asyncio.to_thread(main, ["--state", str(tmp_path / "state"), "status"]) == 0
            assert f"in use outside heet: gpu1 pid {notebook.pid} sleep ({me})" in capsys.readouterr().out
            notebook.kill()
            notebook.wait()
            apps.write_text("")
            await wait_for(ctl, lambda s: not s.hosts[0].gpus[1].others, 30, "the GPU seen free again")

    try:
        run_and_clean(scenario, tmp_path)
    finally:
        notebook.kill()


def test_a_host_someone_else_computes_on_is_removed_from_the_hosts_file_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only this controller's jobs hold an edited or removed host back: it waited for the
    notebook to end."""
    hosts_path, apps = recorded_gpu_box(tmp_path, monkeypatch)
    notebook = subprocess.Popen(["sleep", "600"], start_new_session=True)
    apps.write_text(f"{SECOND_GPU}, {notebook.pid}\n")
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        async with started_controller(load_hosts(hosts_path), store, options) as ctl:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].gpus and s.hosts[0].gpus[1].others, 60,
                           "the notebook seen")
            hosts_path.write_text(f'[defaults]\npython = "{sys.executable}"\n\n[[hosts]]\nname = "other"\n'
                                  f'transport = "local"\nworkdir = "{tmp_path / "w-other"}"\n'
                                  'emulate = { gpu_type = "T4", count = 1, speed = 1.0 }\n')
            await wait_for(ctl, lambda s: [h.name for h in s.hosts] == ["other"], 30, "the box removed")

    try:
        run_and_clean(scenario, tmp_path)
    finally:
        notebook.kill()
