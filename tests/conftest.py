"""Shared test setup. tests/ is on sys.path (no __init__.py), so ``support.*`` helpers import directly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# One BLAS thread per test worker: two workers on two cores each starting OpenBLAS threads for
# matrices of a few dozen columns spent most of the profiling bench's time waiting on each other
# (49 s for what takes 8 s alone). Set before numpy loads; a value given outside is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest

from heet_tui.cluster.loopback_sshd import sshd_available

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The real-sshd, tmux and login-shell tests are the point of the suite (no mocks of SSH or
    shells), so they never skip: a machine without those tools is a broken setup, reported once
    before anything runs."""
    needed = {"OpenSSH (openssh-server's sshd and ssh-keygen)": sshd_available(),
              "tmux": shutil.which("tmux") is not None,
              "tcsh and fish (login shells the remote commands must survive)":
                  shutil.which("tcsh") is not None and shutil.which("fish") is not None}
    missing = [name for name, present in needed.items() if not present]
    if missing:
        raise pytest.UsageError(f"the tests need {', '.join(missing)}: run .ci/run (it installs them with apt) "
                                "or install them yourself; see README.md")


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read or write the developer's real config or state."""
    base = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.delenv("HEET_HOSTS", raising=False)


@pytest.fixture
def repo() -> Path:
    return REPO
