"""The end-to-end tests' loopback SSH lab, torn down with every process started in it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sshd import SshLab, kill_jobs_under


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    lab = SshLab(tmp_path / "lab")
    yield lab
    lab.close()
    for server in lab.servers:
        kill_jobs_under(server.workdir)
