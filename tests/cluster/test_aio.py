"""Stopping tasks: bounded even when a task ignores its cancel, and the caller's cancel still counts."""

from __future__ import annotations

import asyncio

import pytest

from heet_tui.cluster.aio import cancel_and_wait


async def stubborn(release: asyncio.Event) -> None:
    while not release.is_set():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            continue  # what a lost cancel looks like from outside


def test_a_task_that_ignores_its_cancel_is_abandoned_after_the_timeout() -> None:
    async def scenario() -> tuple[bool, bool]:
        release = asyncio.Event()
        polite = asyncio.ensure_future(asyncio.sleep(10))
        rude = asyncio.ensure_future(stubborn(release))
        await asyncio.sleep(0)
        await cancel_and_wait([polite, rude, None], 0.2)
        state = polite.cancelled(), rude.done()
        release.set()
        rude.cancel()
        await asyncio.wait([rude])
        return state

    assert asyncio.run(scenario()) == (True, False)


def test_the_callers_own_cancellation_propagates() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        rude = asyncio.ensure_future(stubborn(release))
        await asyncio.sleep(0)
        stopper = asyncio.ensure_future(cancel_and_wait([rude], 5.0))
        await asyncio.sleep(0.05)
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopper
        release.set()
        rude.cancel()
        await asyncio.wait([rude])

    asyncio.run(scenario())
