"""The ``Backend`` of a TUI attached to a controller that another process runs (``control/attach.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from heet_tui.control.attach import LINE_LIMIT, VERSION, peer_uid, socket_path
from heet_tui.control.snapshots import SnapshotHub
from heet_tui.control.wire import WireError, decode, effect_from_obj, encode, intent_to_obj, snapshot_from_obj
from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import Snapshot

CONNECT_TIMEOUT_S = 5.0


class ControllerGone(ConnectionError):
    """The controller closed the connection (stopped, or crashed)."""


class AttachedBackend:
    def __init__(self, state_dir: Path) -> None:
        self.path = socket_path(state_dir)
        self.pid: int | None = None
        self._hub = SnapshotHub()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._gone: str | None = None

    async def start(self) -> None:
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(self.path), limit=LINE_LIMIT), CONNECT_TIMEOUT_S)
            hello = decode(await asyncio.wait_for(reader.readline(), CONNECT_TIMEOUT_S))
        except TimeoutError:  # its str() is empty: the message ended in ": "
            raise ControllerGone(f"cannot attach to the controller at {self.path}: it did not answer within "
                                 f"{CONNECT_TIMEOUT_S:g} s (busy, or stopped with kill -STOP?)") from None
        except (OSError, WireError) as exc:
            raise ControllerGone(f"cannot attach to the controller at {self.path}: {str(exc) or type(exc).__name__}") \
                from None
        if (uid := peer_uid(self._writer)) is not None and uid != os.getuid():
            # a socket outside the state dir (a long --state path) is in a directory another user may have made
            self._writer.close()
            raise ControllerGone(f"the socket {self.path} is served by another user (uid {uid}), not by your "
                                 "controller: not attaching (remove it, or give --state a shorter path)")
        if hello.get("op") != "hello" or hello.get("version") != VERSION:
            raise ControllerGone(f"the controller at {self.path} speaks another protocol ({hello}); "
                                 "run the same heet-tui version for both")
        self.pid = hello.get("pid")
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        reason = (f"the controller (pid {self.pid}) stopped; start it again (heet-tui run), or reopen heet-tui "
                  "to run one in the TUI")
        try:
            while line := await reader.readline():
                if not line.endswith(b"\n"):  # cut off at its end: the controller stopped mid-snapshot
                    break
                message = decode(line)
                if message["op"] == "snapshot":
                    await self._hub.publish(snapshot_from_obj(message.get("snapshot")))
                elif message["op"] == "result":
                    future = self._pending.pop(message.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(message)
        except (OSError, ValueError) as exc:  # WireError is a ValueError
            reason = f"the controller's connection failed: {exc}"
        finally:
            self._gone = reason
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ControllerGone(reason))
            self._pending.clear()
            await self._hub.close()

    @property
    def gone(self) -> str | None:
        """Why the controller's connection ended, or None while it lasts."""
        return self._gone

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        async for snap in self._hub.stream():
            yield snap
        if self._gone is not None:
            raise ControllerGone(self._gone)  # the TUI says why its updates stopped

    async def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        if self._writer is None or self._gone is not None:
            raise ValueError(self._gone or "not attached to a controller")
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._writer.write(encode({**message, "id": request_id}))
        try:
            await self._writer.drain()
            reply = await future
        except ConnectionError as exc:
            raise ValueError(str(exc)) from None
        if not reply.get("ok"):
            raise ValueError(str(reply.get("error") or "refused"))
        return reply

    async def post(self, intent: Intent) -> str:
        reply = await self._request({"op": "post", "intent": intent_to_obj(intent)})
        return str(reply.get("result") or "")

    async def preview(self, edit: EditJob) -> PredictedEffect:
        reply = await self._request({"op": "preview", "edit": intent_to_obj(edit)})
        return effect_from_obj(reply.get("effect"))

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        reply = await self._request({"op": "job_log", "job_id": str(job_id), "lines": int(lines), "rank": int(rank),
                                     **({"generation": int(generation)} if generation is not None else {})})
        found = reply.get("lines")
        if not isinstance(found, list):
            raise ValueError("the controller sent no log lines")
        return tuple(str(line) for line in found)

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
        await self._hub.close()
