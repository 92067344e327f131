"""Talk to one agent: the version handshake, requests matched to replies, events pushed out.

Every line from the agent goes through ``heet_agent.protocol.decode_line``; the first line that
is not protocol (a shell banner, a library printing to stdout) ends the session as an
``AgentFailure`` quoting that line, and never an exception in the caller's task. An event whose
fields have the wrong types is left out with a warning naming it: it ended the session as "a line
longer than the controller reads", and the next heartbeat did the same after each reconnect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from heet_agent.protocol import PROTOCOL_VERSION, decode_line, encode, message_kind

from heet_tui.cluster.aio import cancel_and_wait
from heet_tui.cluster.channel import AgentChannel
from heet_tui.cluster.errors import AgentFailure, AgentRequestError, ConnectFailure, HostNotReady, Unreachable
from heet_tui.cluster.inert import inert, inert_text

log = logging.getLogger(__name__)


class AgentClient:
    def __init__(self, channel: AgentChannel, host: str, on_event: Callable[[dict[str, Any]], None],
                 link_alive: Callable[[], bool]) -> None:
        self.channel = channel
        self.host = host
        self.on_event = on_event
        self.link_alive = link_alive
        self.last_message = time.monotonic()
        self.closed: asyncio.Future[ConnectFailure] = asyncio.get_running_loop().create_future()
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0
        self._reader: asyncio.Task[None] | None = None
        self.agent_pid: int | None = None
        self._bad_events: set[str] = set()  # said once each

    async def handshake(self, hello: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Read the banner, check the protocol version, send ``hello``; returns its result."""
        try:
            line = await asyncio.wait_for(self.channel.readline(), timeout_s)
        except TimeoutError:
            raise AgentFailure(f"{self.channel.description}: no banner within {timeout_s:g} s") from None
        if not line:
            raise await self._eof_failure("the agent exited before its banner")
        message, problem = decode_line(line)
        if message is None or message.get("event") != "agent_start":
            raise AgentFailure(f"{self.channel.description} printed {_quote(line)} before the agent banner: "
                               "something in the login shell (.bashrc?) writes to stdout, which the protocol needs")
        if message.get("protocol") != PROTOCOL_VERSION:
            raise AgentFailure(f"agent speaks protocol {message.get('protocol')!r}, this heet-tui speaks "
                               f"{PROTOCOL_VERSION}")
        self._reader = asyncio.ensure_future(self._read_loop())
        try:
            return await self.request("hello", {"protocol": PROTOCOL_VERSION, **hello}, timeout_s)
        except AgentRequestError as exc:
            raise AgentFailure(f"handshake refused: {exc}") from None
        except HostNotReady as exc:
            failure = self.closed.result() if self.closed.done() else None
            raise failure or AgentFailure(str(exc)) from None

    async def _eof_failure(self, what: str) -> ConnectFailure:
        if not self.link_alive():
            return Unreachable(f"connection to {self.host} lost")
        await self.channel.stderr_settled()
        tail = inert_text(self.channel.stderr_tail())
        if tail.startswith("heet-tui: workdir "):  # refused by the start command: no agent ran at all
            return AgentFailure(tail.removeprefix("heet-tui: "))
        # the start command execs the hosts file's python: a path not there is the hosts file's to fix
        fix = ("; set python = in the hosts file to a Python 3 this host has" if "exec:" in tail
               and ("not found" in tail or "No such file" in tail) else "")
        return AgentFailure(f"{what}{': ' + tail if tail else ''}{fix}")

    async def _read_loop(self) -> None:
        failure: ConnectFailure
        try:
            while True:
                line = await self.channel.readline()
                if not line:
                    failure = await self._eof_failure("the agent exited")
                    break
                self.last_message = time.monotonic()
                message, problem = decode_line(line)
                if message is None:
                    failure = AgentFailure(f"agent sent a non-protocol line: {problem}")
                    break
                try:
                    message = inert(message)
                except RecursionError:  # it read as "connection lost", though the link was fine
                    failure = AgentFailure("the agent sent a message nested too deep to read")
                    break
                kind = message_kind(message)
                if kind == "reply":
                    future = self._pending.pop(message["id"], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                elif kind == "event":
                    try:
                        self.on_event(message)
                    except (ValueError, TypeError, KeyError, AttributeError) as exc:
                        self._bad_event(message, exc)
        except asyncio.CancelledError:
            failure = Unreachable("connection closed")
        except ConnectFailure as exc:
            failure = exc
        except ValueError as exc:  # asyncio's reader: a line over its limit ("chunk exceed the limit")
            failure = AgentFailure(f"the agent sent a line longer than the controller reads ({exc})")
        except Exception as exc:  # a broken link surfaces as assorted errors; all mean the same here
            failure = Unreachable(f"connection to {self.host} lost ({type(exc).__name__}: {exc})")
        self._fail(failure)

    def _bad_event(self, message: dict[str, Any], exc: Exception) -> None:
        said = f"{self.host}: the agent sent a malformed {str(message.get('event'))[:40]!r} event, left out " \
               f"({type(exc).__name__}: {str(exc)[:200]})"
        if said not in self._bad_events and len(self._bad_events) < 20:
            self._bad_events.add(said)
            log.warning("%s", said)

    def _fail(self, failure: ConnectFailure) -> None:
        if not self.closed.done():
            self.closed.set_result(failure)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(HostNotReady(f"host {self.host}: {failure}"))
        self._pending.clear()

    async def request(self, op: str, args: dict[str, Any] | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """Send one request and wait for its reply's ``result``.

        Raises ``AgentRequestError`` with the agent's message when it refuses, ``HostNotReady``
        when the link ends first or no reply comes within ``timeout_s``.
        """
        if self.closed.done():
            raise HostNotReady(f"host {self.host}: {self.closed.result()}")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self.channel.send(encode({"id": request_id, "op": op, "args": args or {}}))
            reply = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise HostNotReady(f"host {self.host}: no reply to {op} within {timeout_s:g} s") from None
        except (OSError, ConnectionError) as exc:
            raise HostNotReady(f"host {self.host}: cannot send {op}: {exc}") from None
        finally:
            self._pending.pop(request_id, None)
        if not reply.get("ok"):
            raise AgentRequestError(f"host {self.host}: {op}: {reply.get('error') or 'refused'}")
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    async def close(self) -> None:
        await cancel_and_wait([self._reader], 5.0, f"agent reader of {self.host}")
        self._fail(Unreachable("connection closed"))
        await self.channel.close()


def _quote(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip()
    return repr(text if len(text) <= 120 else text[:120] + "...")
