"""Fixtures for driving the real app against the FakeBackend."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ui_fakes import FakeBackend

from heet_tui.ui.app import HeetApp


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def make_app(backend: FakeBackend, repo) -> Callable[..., HeetApp]:
    def make(start_mode: str = "jobs", read_only: bool = False, hosts_path=None) -> HeetApp:
        return HeetApp(backend, hosts_path or repo / "configs" / "local.toml", read_only=read_only,
                       start_mode=start_mode)

    return make
