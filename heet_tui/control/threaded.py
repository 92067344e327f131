"""Run a backend on its own thread and event loop, so the UI's loop only ever draws.

The controller does SSH I/O, SQLite writes and solver runs; even when each is short, together
they would stall key presses and frames if they shared the UI's loop. This adapter keeps the
``Backend`` protocol on the UI side and forwards every call to the backend's loop. The backend
is *built* on its thread too (``factory``), so thread-bound resources such as SQLite
connections belong to the thread that uses them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from heet_tui.core.backend import Backend
from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import Snapshot

T = TypeVar("T")


class ThreadedBackend:
    """A ``Backend`` whose work happens on a private thread; snapshots arrive latest-first."""

    def __init__(self, factory: Callable[[], Backend], name: str = "heet-controller") -> None:
        self._factory = factory
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._inner: Backend | None = None
        self._ready = threading.Event()
        self._build_error: BaseException | None = None
        self._latest: Snapshot | None = None
        self._closed = False
        self._wake: asyncio.Event | None = None
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self._pump: Any = None
        self._error: Exception | None = None

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            self._inner = self._factory()
        except BaseException as exc:  # reported to the caller of start()
            self._build_error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _call(self, coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        if self._loop is None or self._inner is None:
            raise RuntimeError("backend not started")

        async def inner() -> T:
            return await coro_fn()

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(inner(), self._loop))

    async def start(self) -> None:
        self._ui_loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        await asyncio.to_thread(self._ready.wait)
        if self._build_error is not None:
            raise self._build_error
        assert self._inner is not None
        await self._call(self._inner.start)
        self._pump = asyncio.run_coroutine_threadsafe(self._forward(), self._loop)  # type: ignore[arg-type]

    async def _forward(self) -> None:
        """On the backend's loop: hand each snapshot to the UI loop, keeping only the newest."""
        assert self._inner is not None and self._ui_loop is not None
        try:
            async for snap in self._inner.snapshots():
                self._ui_loop.call_soon_threadsafe(self._deliver, snap)
        except Exception as exc:  # why the stream ended is the UI's to show
            self._error = exc
        finally:
            self._ui_loop.call_soon_threadsafe(self._deliver, None)

    def _deliver(self, snap: Snapshot | None) -> None:
        if snap is None:
            self._closed = True
        else:
            self._latest = snap
        assert self._wake is not None
        self._wake.set()

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._latest is not None:
                snap, self._latest = self._latest, None
                yield snap
            if self._closed:
                if self._error is not None:
                    raise self._error
                return

    async def post(self, intent: Intent) -> str:
        assert self._inner is not None
        inner = self._inner
        return await self._call(lambda: inner.post(intent))

    async def preview(self, edit: EditJob) -> PredictedEffect:
        assert self._inner is not None
        inner = self._inner
        return await self._call(lambda: inner.preview(edit))

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        assert self._inner is not None
        inner = self._inner
        return await self._call(lambda: inner.job_log(job_id, lines, rank, generation))

    async def stop(self) -> None:
        if self._loop is None or self._inner is None:
            return
        try:
            await self._call(self._inner.stop)
        finally:
            if self._pump is not None:
                self._pump.cancel()
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                await asyncio.to_thread(self._thread.join, 10)
