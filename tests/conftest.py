"""Shared test setup. tests/ is on sys.path (no __init__.py), so ``support.*`` helpers import directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HEET_SHARED", REPO.parent / "shared"))


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
    if not (SHARED / "data").is_dir():
        pytest.skip(f"shared data not present at {SHARED}")
    return SHARED
