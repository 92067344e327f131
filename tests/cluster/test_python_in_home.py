"""A hosts file's ``python``: ``~/miniconda3/bin/python``'s ~ is the login's home, for the agent
and the jobs (it was quoted whole: "exec: ~/py3: not found" at connect, with the interpreter right
there); one that cannot import torch is warned of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from heet_tui.cli import hosts_check
from heet_tui.cluster.remote_command import start_agent
from heet_tui.config import hosts_file

NAME = "heet-agent-0123456789abcdef.pyz"


def _home_python(home: Path) -> None:
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "py").symlink_to(sys.executable)


def test_the_agent_starts_with_a_python_under_home(tmp_path: Path) -> None:
    home, workdir = tmp_path / "home", tmp_path / "w"
    _home_python(home)
    workdir.mkdir(mode=0o700)
    (workdir / NAME).write_text("import sys\nprint('agent on', sys.version_info[0])\n")
    done = subprocess.run(["sh", "-c", start_agent("~/bin/py", str(workdir), NAME, "h1")], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "agent on 3", done.stderr


def test_a_job_launched_with_a_python_under_home_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _home_python(home)
    agent = subprocess.Popen([sys.executable, "-m", "heet_agent", "--workdir", str(tmp_path / "a"), "--host", "h1"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "HOME": str(home)})
    try:
        assert json.loads(agent.stdout.readline())["event"] == "agent_start"

        def request(i: int, op: str, **args) -> dict:
            agent.stdin.write(json.dumps({"id": i, "op": op, "args": args}) + "\n")
            agent.stdin.flush()
            while (message := json.loads(agent.stdout.readline())).get("id") != i:
                pass
            return message

        assert request(1, "hello", protocol=1, probes=[])["ok"]
        marker = tmp_path / "ran"
        launched = request(2, "launch", job_id="j", generation=1, workdir=str(tmp_path),
                           argv=["~/bin/py", "-c", f"open({str(marker)!r}, 'w').close()"])
        assert launched["ok"], launched
        while (message := json.loads(agent.stdout.readline())).get("event") != "job_exit":
            pass
        assert message["exit_code"] == 0 and marker.exists(), message
    finally:
        agent.stdin.close()
        agent.wait(timeout=10)


def test_a_host_whose_python_cannot_import_torch_is_warned_of(lab, tmp_path, capsys):
    """hosts check read "ready" (exit 0) for a host whose python3 had no torch; every job there then
    failed with ModuleNotFoundError, three attempts each."""
    bare = tmp_path / "python-nosite"  # no site-packages: no torch, whatever this machine has
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    plain = lab.add_host("plain")
    hosts = hosts_file.load_hosts(lab.hosts_toml([lab.entry_for(plain, emulate={"gpu_type": "T4", "count": 1, "speed": 1.0})],
                                      python=str(bare)))
    assert hosts_check.run_check(hosts, as_json=True) == 0, "a warning: jobs that need no torch run there"
    (row,) = json.loads(capsys.readouterr().out)
    assert any(w.startswith(f"its python ({sys.executable}) cannot import torch") for w in row["warnings"]), row

