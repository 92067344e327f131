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
