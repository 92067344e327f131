"""Fixtures for driving the real app against the FakeBackend."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from ui_fakes import FakeBackend

from heet_tui.ui.app import HeetApp

SIZE = (150, 45)


async def wait_for(pilot: Pilot, condition: Callable[[], bool], tries: int = 100) -> None:
    """Let the app process messages until ``condition`` holds (bounded, so a bug fails, never hangs)."""
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.02)
    assert condition(), "condition never became true"


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def make_app(backend: FakeBackend, repo) -> Callable[..., HeetApp]:
    def make(start_mode: str = "jobs", read_only: bool = False, hosts_path=None) -> HeetApp:
        return HeetApp(backend, hosts_path or repo / "configs" / "local.toml", read_only=read_only,
                       start_mode=start_mode)

    return make


def run(coro) -> None:
    """pytest-asyncio is not a dependency: each test drives its own event loop."""
    import asyncio

    asyncio.run(coro)
