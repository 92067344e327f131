"""Shared test setup. tests/ is on sys.path (no __init__.py), so ``support.*`` helpers import directly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HEET_SHARED", REPO.parent / "shared"))


def pytest_configure(config: pytest.Config) -> None:
    """In CI the real-sshd and tmux tests must run: .ci/run installs both, so their absence is a
    broken setup to report, never a reason for those tests to skip quietly."""
    if not os.environ.get("CI"):
        return
    needed = {"sshd (openssh-server)": Path("/usr/sbin/sshd").exists(),
              "ssh-keygen (openssh-client)": shutil.which("ssh-keygen") is not None,
              "tmux": shutil.which("tmux") is not None}
    missing = [name for name, present in needed.items() if not present]
    if missing:
        raise pytest.UsageError(f"CI needs {', '.join(missing)} (.ci/run installs them); the tests that use "
                                "them must run, not skip")


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


@pytest.fixture
def shared() -> Path:
    # The project must pass without ../shared (it ships the small tables its tests need); the
    # few tests that compare against the full measured data run only where it is present.
    if not (SHARED / "data").is_dir():
        pytest.skip(f"shared data not present at {SHARED}")
    return SHARED
