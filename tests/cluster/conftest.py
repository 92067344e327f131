"""Fixtures for the cluster tests: a lab of real sshd servers (see tests/support/sshd.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make `support` importable

from support.sshd import SshLab, kill_jobs_under  # noqa: E402


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # only the lab's key may be offered
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    lab = SshLab(tmp_path / "lab")
    yield lab
    lab.close()
    for server in lab.servers:
        kill_jobs_under(server.workdir)


@pytest.fixture
def agent(tmp_path):
    """The agent alone, on ``tmp_path`` as its workdir (tests/cluster/agent_process.py)."""
    from agent_process import AgentProcess

    process = AgentProcess(tmp_path)
    yield process
    if process.proc.poll() is None:
        process.proc.kill()
        process.proc.wait()
