"""Helpers for the UI tests (a module of its own: ``conftest`` is not importable by name when
several test folders each have one)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.pilot import Pilot

SIZE = (150, 45)


async def wait_for(pilot: Pilot, condition: Callable[[], bool], tries: int = 100) -> None:
    """Let the app process messages until ``condition`` holds (bounded, so a bug fails, never hangs)."""
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.02)
    assert condition(), "condition never became true"


def run(coro) -> None:
    """pytest-asyncio is not a dependency: each test drives its own event loop."""
    asyncio.run(coro)
