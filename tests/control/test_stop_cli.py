"""``heet-tui stop``: a script stopped ``heet-tui run`` with a SIGTERM to the pid that ``status
--json`` gave, and could not tell when the controller had let go of the store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from control_lab import kill_local_jobs, manual_controller, run_and_clean, write_job, write_local_hosts

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store


def test_stop_ends_a_headless_run_and_waits_for_it_while_its_job_trains_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)])
    state = ["--state", str(tmp_path / "state")]
    assert main(["stop", *state]) == 0, "nothing to stop is not a failure"
    assert f"no controller runs on {tmp_path / 'state'}: nothing to stop" in capsys.readouterr().err
    assert main(["submit", str(write_job(tmp_path, "a", steps=100_000, max_gpus=1)), *state]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    run = subprocess.Popen([sys.executable, "-m", "heet_tui.cli.main", "run", "--interval", "0.3", "--no-profile",
                            "--auto-approve", "--hosts", str(hosts), *state], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env)
    try:
        store = Store(tmp_path / "state")
        deadline = time.monotonic() + 90
        while store.job("a").job.steps_done == 0:
            assert time.monotonic() < deadline and run.poll() is None, "a never trained"
            time.sleep(0.3)
        capsys.readouterr()
        assert main(["stop", *state]) == 0
        said = capsys.readouterr().out
        assert f"controller (pid {run.pid}) on {tmp_path / 'state'} stopped; 1 job(s) train on" in said, said
        assert controller_running(tmp_path / "state") is None, "it returned only once the store was let go"
        assert run.wait(10) == 0
        assert store.job("a").job.state.value == "running", "stopping the controller stopped no job"
    finally:
        run.kill()
        kill_local_jobs(tmp_path)


def test_stop_leaves_a_tuis_controller_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    store.set_setting("controller_owner", '{"pid": 1, "kind": "run"}')  # an earlier heet-tui run's, long gone

    async def scenario() -> None:
        async with manual_controller(hosts, store):  # as the TUI runs its own: in its process, no heet-tui run
            assert await asyncio.to_thread(main, ["stop", "--state", str(store.dir)]) == 1
            err = capsys.readouterr().err
            assert f"(pid {os.getpid()}) is not a heet-tui run but a TUI's" in err and "--force closes it" in err
            assert controller_running(store.dir) == os.getpid(), "left running"

    run_and_clean(scenario, tmp_path)
    assert main(["stop", "--state", str(store.dir), "--wait", "-1"]) == 2
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal, exit 2
        main(["stop", "--state", str(store.dir), "--wait", "nan"])
    assert refused.value.code == 2, "it would have waited for ever"
