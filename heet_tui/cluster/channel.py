"""The byte pipe to a running agent, the same for SSH and local transports."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

MAX_STDERR_LINE = 600  # characters of one stderr line kept for a host's error


class LineReader(Protocol):
    async def readline(self) -> bytes: ...

    async def read(self, n: int = -1) -> bytes: ...


class AgentChannel:
    """stdin/stdout of one agent process plus a tail of its stderr (for error messages)."""

    def __init__(self, stdout: LineReader, stdin: Any, stderr: LineReader | None,
                 closer: Callable[[], Awaitable[None]], description: str) -> None:
        self._stdout, self._stdin = stdout, stdin
        self._closer = closer
        self.description = description
        self._stderr_lines: deque[str] = deque(maxlen=20)
        self._stderr_task = asyncio.ensure_future(self._pump_stderr(stderr)) if stderr is not None else None

    async def _pump_stderr(self, stderr: LineReader) -> None:
        with contextlib.suppress(Exception):
            while True:
                line = await stderr.readline()
                if not line:
                    return
                text = line.decode("utf-8", "replace").rstrip()
                # a 2 MB line went whole into the host's error: `hosts check`, `status`, the store
                self._stderr_lines.append(text if len(text) <= MAX_STDERR_LINE else
                                          f"{text[:MAX_STDERR_LINE // 2]} [... {len(text) - MAX_STDERR_LINE} "
                                          f"characters ...] {text[-MAX_STDERR_LINE // 2:]}")

    async def stderr_settled(self, timeout_s: float = 1.0) -> None:
        """Wait, bounded, for stderr's end. A process that dies writes why to stderr, and over SSH
        (or on a busy machine) that can arrive after stdout's EOF: reading the tail at once would
        report a failure without its reason."""
        if self._stderr_task is not None and not self._stderr_task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), timeout_s)

    def stderr_tail(self) -> str:
        return " | ".join(line for line in self._stderr_lines if line)

    async def readline(self) -> bytes:
        """One line, ``b""`` at EOF."""
        return await self._stdout.readline()

    async def send(self, data: bytes) -> None:
        self._stdin.write(data)
        await self._stdin.drain()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stdin.write_eof()
        with contextlib.suppress(Exception):
            await self._closer()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
