"""A run given a bound (``HEET_RUN_MAX_S``: profiling runs) ends by itself once past it, whoever is
left to stop it (remote/jobwrap.py): with its controller killed, a profiling run trained its job's
whole target for nobody while the controller stayed down."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from agent_process import AgentProcess, alive

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.launch import plan_profile_launch
from heet_tui.core.job import JobSpec, Target, TargetKind


def _ended(exit_file: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not exit_file.exists():
        assert time.monotonic() < deadline, "the run did not end by itself"
        time.sleep(0.1)
    return json.loads(exit_file.read_text())


def test_a_bounded_run_stops_by_itself_once_its_agent_and_controller_are_gone(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path)
    try:
        agent.line()
        agent.request("hello", protocol=1, probes=[])
        polite = "import time\nprint('ready', flush=True)\ntime.sleep(120)\n"
        deaf = ("import signal, subprocess, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'])\n"
                "print('grandchild', child.pid, flush=True)\ntime.sleep(120)\n")
        env = {"HEET_RUN_MAX_S": "2", "HEET_STOP_GRACE": "1"}
        launched = {name: agent.request("launch", job_id=name, generation=1, argv=[sys.executable, "-c", code],
                                        env=env)["result"] for name, code in (("polite", polite), ("deaf", deaf))}
        free = agent.request("launch", job_id="free", generation=1, argv=[sys.executable, "-c", polite])["result"]
        agent.proc.stdin.close()  # the controller is gone, and the agent with it
        agent.proc.wait(timeout=15)
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
    exits = tmp_path / "hosts" / "h1" / "exits"
    assert _ended(exits / "polite-g1.json", 30)["signal"] == 15
    assert _ended(exits / "deaf-g1.json", 30)["signal"] == 9, "killed at the end of its stop grace"
    log = Path(launched["deaf"]["log"]).read_text()
    assert "stopped: this run was still going after 2 s, its bound (HEET_RUN_MAX_S)" in log, log
    grandchild = int(log.split("grandchild ", 1)[1].split()[0])
    deadline = time.monotonic() + 10
    while alive(grandchild):
        assert time.monotonic() < deadline, "the job's own child, deaf too, was left running"
        time.sleep(0.1)
    assert not (exits / "free-g1.json").exists(), "a run without a bound trains on without its agent"
    os.killpg(free["pid"], signal.SIGKILL)


def test_a_profiling_run_carries_its_bound_and_a_jobs_own_run_none() -> None:
    from heet_tui.control.launch import plan_launch
    from heet_tui.core.allocation import Allocation

    spec = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10_000))
    host = HostEntry("h", "localhost")
    run = plan_profile_launch("j", spec, host, 0, 1, owner="s", max_s=660.0)
    assert dict(run.env)["HEET_RUN_MAX_S"] == "660"
    own = plan_launch("j", spec, Allocation.of("j", "T4", {"h": [0]}), 2, {"h": host}, 29500, owner="s")
    assert "HEET_RUN_MAX_S" not in dict(own[0].env)


def test_the_helper_says_a_run_is_a_profiling_run(monkeypatch) -> None:
    """Scripts wrote their final outputs in profiling runs too (three runs, two at once, one file)."""
    from heet_agent import elastic

    for value, profiling in (("1", True), (None, False)):
        if value is None:
            monkeypatch.delenv("HEET_PROFILING", raising=False)
        else:
            monkeypatch.setenv("HEET_PROFILING", value)
        run = elastic.ElasticRun(8, 10, None, 0, None, 1, None, "t")
        assert run.profiling is profiling
