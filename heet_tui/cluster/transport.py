"""Transports: how an agent process is started on a host, over SSH or as a local subprocess.

Both give the supervisor the same thing: ``open() -> AgentChannel`` whose first line is the
agent's ``agent_start`` banner, ``connected()`` to tell a lost link from a crashed agent, and
``close()``. Failures are raised as ``ConnectFailure`` subclasses so each maps to a host state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Protocol

from heet_tui.cluster.agent_bundle import AgentBundle
from heet_tui.cluster.channel import AgentChannel
from heet_tui.cluster.errors import AgentFailure
from heet_tui.cluster.remote_command import NEED_AGENT, NOT_YOURS, check_python, check_workdir
from heet_tui.config.file_safety import planted_link, unsafe_ancestor

STREAM_LIMIT = 8 << 20  # bytes per line the controller accepts from an agent


class Transport(Protocol):
    async def open(self, bundle: AgentBundle) -> AgentChannel: ...

    def connected(self) -> bool: ...

    async def close(self) -> None: ...


class PushbackReader:
    """A reader with one line put back in front (the banner the transport already read)."""

    def __init__(self, first: bytes, reader) -> None:
        self._first: bytes | None = first
        self._reader = reader

    async def readline(self) -> bytes:
        if self._first is not None:
            line, self._first = self._first, None
            return line
        return await self._reader.readline()

    async def read(self, n: int = -1) -> bytes:
        return await self._reader.read(n)


class LocalTransport:
    """The agent as a subprocess of this machine (``transport = "local"`` hosts, and tests)."""

    def __init__(self, host: str, python: str, workdir: str, check_only: bool = False) -> None:
        self.host = host
        self.check_only = check_only
        self.python = os.path.expanduser(check_python(host, python))
        self.workdir = Path(os.path.expanduser(check_workdir(host, workdir)))
        self._proc: asyncio.subprocess.Process | None = None

    def _refuse_planted_link(self) -> None:
        """A link another user made on the way to the workdir, the last step or any above it: one in
        /tmp led the agent into a directory of the user's, and was then pointed at the planter's
        own tree, whose agent file ran as the user with the jobs' secrets (a link above the
        workdir was never looked at)."""
        if (why := planted_link(self.workdir)) is not None:
            raise AgentFailure(f"workdir {self.workdir}: {why}: the agent is not run through it; give the host a "
                               "workdir only you can write")

    async def open(self, bundle: AgentBundle) -> AgentChannel:
        try:
            self._refuse_planted_link()
            if not self.workdir.exists():  # the user's alone whatever the umask: at 000 it was made
                old = os.umask(0o077)  # and the missing directories above it: made 0777, refused as open
                try:
                    self.workdir.parent.mkdir(parents=True, exist_ok=True)
                finally:
                    os.umask(old)
                self.workdir.mkdir(mode=0o700)
                self._refuse_planted_link()  # one made meanwhile where a directory was missing was followed
            mode = self.workdir.stat()
            if mode.st_uid != os.geteuid() or mode.st_mode & 0o022:  # a planted agent file would run as you
                raise AgentFailure(f"workdir {self.workdir} {NOT_YOURS}")
            if (above := unsafe_ancestor(self.workdir)) is not None:  # as an ssh host's (enter_workdir)
                raise AgentFailure(f"workdir {self.workdir.resolve()}: {above[0]} above it {above[1]}: the agent is "
                                   "not run from it; give the host a workdir only you and root control")
            target = self.workdir / bundle.file_name
            if not target.is_file():
                tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
                    fh.write(bundle.data)  # private, as an SSH host's
                os.replace(tmp, target)
        except OSError as exc:
            raise AgentFailure(f"cannot write the agent to {self.workdir}: {exc.strerror or exc}") from None
        unpacked = self.workdir / bundle.unpacked_entry  # left by an earlier start: no zip to open
        if unpacked.is_file():
            target = unpacked
        try:
            proc = await asyncio.create_subprocess_exec(
                self.python, str(target), "--workdir", str(self.workdir), "--host", self.host,
                *(["--check-only"] if self.check_only else []),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=str(self.workdir), limit=STREAM_LIMIT, start_new_session=True,
            )
        except OSError as exc:
            raise AgentFailure(f'cannot run python "{self.python}": {exc.strerror or exc}') from None
        self._proc = proc
        assert proc.stdout is not None and proc.stdin is not None
        first = await proc.stdout.readline()

        async def closer() -> None:
            # A healthy agent exits within a poll interval of EOF; one that does not is hung.
            with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), 2.0)
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await _reaped(proc)

        return AgentChannel(PushbackReader(first, proc.stdout), proc.stdin, proc.stderr, closer,
                            f"local agent in {self.workdir}")

    def connected(self) -> bool:
        return True  # no link to lose: an EOF means the agent itself ended

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), 5.0)
            if proc.returncode is None:  # hung: killing it cannot hurt jobs, they do not depend on it
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await _reaped(proc)


async def _reaped(proc: asyncio.subprocess.Process) -> None:
    """Wait for a killed agent's exit: reaped after its event loop closed, asyncio printed "Loop ...
    that handles pid N is closed" on the terminal as the TUI quit."""
    with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
        await asyncio.wait_for(proc.wait(), 2.0)


def is_need_agent(line: bytes) -> bool:
    return line.strip() == NEED_AGENT.encode()
