"""A running controller serves TUIs that attach to it, over a Unix socket private to the user.

``heet-tui run`` on a login node (in tmux, or as a service) holds the state directory's lock,
and a TUI opened beside it used to show only the hosts file. Now the controller listens on
``<state>/controller.sock`` (mode 0600 in the 0700 state directory; a path too long for a
socket goes under ``$XDG_RUNTIME_DIR/heet-tui-<uid>``, else ``/tmp/heet-tui-<uid>``, 0700), refuses peers of
another uid, and speaks JSON lines (``control/wire.py``):

* on connect it sends ``{"op": "hello", "version": 1, "pid": ...}``, then every snapshot it
  publishes, latest first: ``{"op": "snapshot", "snapshot": {...}}``;
* ``{"op": "post", "id": n, "intent": {...}}``, ``{"op": "preview", "id": n, "edit": {...}}`` and
  ``{"op": "job_log", "id": n, "job_id": "...", "lines": 200}`` (optional ``"rank"``, ``"generation"``)
  are answered with ``{"op": "result", "id": n, "ok": true, "result": "..." | "effect": {...}}``
  or ``{"ok": false, "error": "..."}``.

No TCP port is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path
from typing import Any

from heet_tui.cluster.aio import spawn
from heet_tui.config.file_safety import who
from heet_tui.control.wire import WireError, decode, edit_from_obj, encode, intent_from_obj, to_obj

log = logging.getLogger(__name__)
VERSION = 1
SOCKET_NAME = "controller.sock"
MAX_SOCKET_PATH = 100  # bytes; sun_path holds 108 on Linux, fewer elsewhere
LINE_LIMIT = 256 * 1024 * 1024  # a snapshot of thousands of jobs is one line


def socket_path(state_dir: Path) -> Path:
    direct = Path(state_dir) / SOCKET_NAME
    if len(os.fsencode(direct)) <= MAX_SOCKET_PATH:
        return direct
    digest = hashlib.sha256(os.fsencode(Path(state_dir).resolve())).hexdigest()[:16]
    # $XDG_RUNTIME_DIR can itself be deep (a container's, a test runner's), so the first base
    # where the whole path fits wins; both sides walk the same list and find the same one.
    bases = [os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"]
    candidates = [Path(base) / f"heet-tui-{os.getuid()}" / f"{digest}.sock" for base in bases if base]
    return next((c for c in candidates if len(os.fsencode(c)) <= MAX_SOCKET_PATH), candidates[-1])


def _private_parent(path: Path) -> None:
    """The socket's directory exists, is ours and is closed to others (or we refuse to listen)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.parent.lstat()  # a link another user made there led the socket into a directory of ours they chose
    if stat.S_ISLNK(st.st_mode) and st.st_uid not in (os.getuid(), 0):
        raise OSError(f"{path.parent} is a link {who(st.st_uid)} made, not a directory of yours: have it removed (or "
                      f"give the state directory a shorter path, {MAX_SOCKET_PATH} bytes with the socket's name, and "
                      "the socket goes there instead)")
    st = path.parent.stat()
    if st.st_uid != os.getuid():  # made first by someone else (in /tmp): who, and what to do
        raise OSError(f"{path.parent} must be a directory of yours that only you can open, and {who(st.st_uid)} "
                      f"made it: have it removed (or give the state directory a shorter path, {MAX_SOCKET_PATH} bytes "
                      "with the socket's name, and the socket goes there instead)")
    if st.st_mode & 0o077:
        raise OSError(f"{path.parent} must be a directory of yours that only you can open: chmod 700 {path.parent}")



def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


class AttachServer:
    """Serves ``backend`` (the controller: snapshots, post, preview) to attached TUIs."""

    def __init__(self, backend: Any, state_dir: Path) -> None:
        self.backend, self.path = backend, socket_path(state_dir)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def viewers(self) -> int:
        """Processes attached now: other TUIs, ``log -f``, a ``status`` under way."""
        return len(self._writers)

    async def start(self) -> None:
        _private_parent(self.path)
        self.path.unlink(missing_ok=True)  # a dead controller's; the state lock says none is live
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=LINE_LIMIT)
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            for writer in list(self._writers):  # the attached TUIs see the end of the stream at once
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = peer_uid(writer)
        if uid is not None and uid != os.getuid():
            writer.close()
            return
        self._writers.add(writer)
        writer.write(encode({"op": "hello", "version": VERSION, "pid": os.getpid()}))
        pusher = spawn(self._tasks, self._push(writer))
        try:
            while line := await reader.readline():
                spawn(self._tasks, self._answer(line, writer))
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            pusher.cancel()
            self._writers.discard(writer)
            writer.close()

    async def _push(self, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            async for snap in self.backend.snapshots():
                writer.write(encode({"op": "snapshot", "snapshot": to_obj(snap)}))
                await writer.drain()  # a slow TUI holds up only its own stream, which skips stale ones

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        reply: dict[str, Any] = {"op": "result", "id": None, "ok": False}
        try:
            message = decode(line)
            reply["id"] = message.get("id")
            if message["op"] == "post":
                reply["result"] = await self.backend.post(intent_from_obj(message.get("intent")))
            elif message["op"] == "preview":
                reply["effect"] = to_obj(await self.backend.preview(edit_from_obj(message.get("edit"))))
            elif message["op"] == "job_log":
                job_id, lines, rank = message.get("job_id"), message.get("lines", 200), message.get("rank", 0)
                generation = message.get("generation")
                numbers = (lines, rank) if generation is None else (lines, rank, generation)
                if not isinstance(job_id, str) or any(isinstance(n, bool) or not isinstance(n, int) for n in numbers):
                    raise WireError("job_log needs a job_id string and integer lines, rank and generation")
                reply["lines"] = list(await self.backend.job_log(job_id, lines, rank, generation))
            else:
                raise WireError(f"unknown op {message['op']!r}")
            reply["ok"] = True
        except (ValueError, WireError) as exc:
            reply["error"] = str(exc)
        except Exception as exc:  # a controller bug must reach the TUI as an answer, not a hang
            log.exception("attached TUI request")
            reply["error"] = f"{type(exc).__name__}: {exc}"
        with contextlib.suppress(ConnectionError):
            writer.write(encode(reply))
            await writer.drain()
