"""``Cluster``: every host's supervisor, one event stream, and the requests the controller makes.

See the package docstring (``heet_tui.cluster``) for the API contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from heet_tui.cluster.agent_bundle import AgentBundle
from heet_tui.cluster.agent_client import AgentClient
from heet_tui.cluster.aio import cancel_and_wait
from heet_tui.cluster.channel import AgentChannel
from heet_tui.cluster.errors import (
    AgentFailure,
    ClusterError,
    ConnectFailure,
    HostNotReady,
    UnknownHost,
    Unreachable,
)
from heet_tui.cluster.events import ClusterEvent, RemoteJob
from heet_tui.cluster.hostkeys import Recorded, trust_host
from heet_tui.cluster.options import ClusterOptions
from heet_tui.cluster.remote_command import UnsafeValue
from heet_tui.cluster.ssh_settings import SshConfigError
from heet_tui.cluster.ssh_transport import SshTransport
from heet_tui.cluster.supervisor import HostSupervisor
from heet_tui.cluster.transport import LocalTransport, Transport
from heet_tui.config.hosts_file import HostEntry, HostsFile
from heet_tui.core.host import HostState
from heet_tui.core.snapshot import HostStatus

STOP_TIMEOUT_S = 15.0  # a supervisor closing a hung link waits at most ~7 s for it

TransportFactory = Callable[[HostEntry], Transport]


def default_transport_factory(ssh_config: Path | None, options: ClusterOptions) -> TransportFactory:
    def make(entry: HostEntry) -> Transport:
        if entry.transport == "local":
            return LocalTransport(entry.name, entry.python, entry.workdir, options.check_only)
        return SshTransport(entry, ssh_config, options.known_hosts_fallback(), options.connect_timeout_s,
                            options.keepalive_s, options.check_only, options.trust_hosts_option)

    return make


class _BrokenTransport:
    """Stands in for a host whose hosts-file values cannot be used; reports why, forever."""

    def __init__(self, failure: ConnectFailure) -> None:
        self.failure = failure

    async def open(self, bundle: AgentBundle) -> AgentChannel:
        raise self.failure

    def connected(self) -> bool:
        return False

    async def close(self) -> None:
        return None


class _ConfigRetryingTransport:
    """Stands in for a host whose SSH config could not be read: each connect reads it again, so a
    fix to ~/.ssh/config is seen (a host first met while a line of it was broken kept that error
    until the controller restarted, through every reconnect)."""

    def __init__(self, make: Callable[[], Transport]) -> None:
        self.make = make
        self.inner: Transport | None = None

    @property
    def target(self) -> object:
        return getattr(self.inner, "target", None)

    async def open(self, bundle: AgentBundle) -> AgentChannel:
        if self.inner is None:
            try:
                self.inner = self.make()
            except SshConfigError as exc:
                raise Unreachable(str(exc)) from None
        return await self.inner.open(bundle)

    def connected(self) -> bool:
        return self.inner is not None and self.inner.connected()

    async def close(self) -> None:
        if self.inner is not None:
            await self.inner.close()

    async def start_sftp(self) -> object | None:
        start = getattr(self.inner, "start_sftp", None)
        return await start() if start is not None else None


class EventSubscription:
    """An async iterator over cluster events; ``close()`` (or leaving ``async with``) unsubscribes."""

    def __init__(self, registry: list[asyncio.Queue[ClusterEvent]]) -> None:
        self.queue: asyncio.Queue[ClusterEvent] = asyncio.Queue()
        self._registry = registry

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> ClusterEvent:
        return await self.queue.get()

    def get_nowait(self) -> ClusterEvent | None:
        """The next queued event, or ``None`` when there is none yet."""
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None

    def close(self) -> None:
        if self.queue in self._registry:
            self._registry.remove(self.queue)

    async def __aenter__(self) -> EventSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Cluster:
    def __init__(self, hosts_file: HostsFile, options: ClusterOptions | None = None,
                 transport_factory: TransportFactory | None = None) -> None:
        self.hosts_file = hosts_file
        self.options = options or ClusterOptions()
        factory = transport_factory or default_transport_factory(hosts_file.ssh_config, self.options)
        self._subscribers: list[asyncio.Queue[ClusterEvent]] = []
        self._changed: asyncio.Event | None = None
        self._slots: asyncio.Semaphore | None = None
        self._factory = factory
        self._supervisors: dict[str, HostSupervisor] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    # ---- life cycle
    async def start(self) -> None:
        """Start one supervisor per host; returns immediately (hosts connect in the background)."""
        if self._tasks:
            return
        self._slots = asyncio.Semaphore(max(1, self.options.max_connects))
        self._changed = asyncio.Event()
        self._supervisors.clear()
        for entry in self.hosts_file.hosts:
            self._supervise(entry)

    def _supervise(self, entry: HostEntry) -> None:
        assert self._slots is not None
        try:
            transport = self._factory(entry)
        except SshConfigError:  # cannot even work out how to connect, yet: said at each connect
            transport = _ConfigRetryingTransport(lambda: self._factory(entry))
        except (UnsafeValue, ValueError) as exc:  # e.g. a python that cannot be a command
            transport = _BrokenTransport(AgentFailure(str(exc)))
        sup = HostSupervisor(entry, transport, self.options, self._publish, self._slots,
                             notes=lambda real_type: [w for w in (self.hosts_file.speed_clash(entry.name),
                                                                  self.hosts_file.emulation_clash(entry.name, real_type))
                                                      if w])
        self._supervisors[entry.name] = sup
        self._tasks[entry.name] = asyncio.ensure_future(sup.run())

    async def add_host(self, entry: HostEntry) -> None:
        """Start supervising a host added to the hosts file while running."""
        if entry.name in self._supervisors:
            raise ClusterError(f'host "{entry.name}" is already part of the cluster')
        self._supervise(entry)

    def relabel(self, entry: HostEntry) -> None:
        """Take a host's new rack or tags (its entry otherwise the same) without reconnecting."""
        self._sup(entry.name).entry = entry

    async def remove_host(self, name: str) -> None:
        """Stop supervising a host (its connection closes; its jobs keep running there)."""
        sup = self._sup(name)
        await sup.stop()
        await cancel_and_wait([self._tasks.pop(name, None)], STOP_TIMEOUT_S, f"supervisor of {name}")
        await sup.transport.close()
        del self._supervisors[name]

    async def stop(self) -> None:
        """Close every connection; agents exit on EOF and leave their jobs running."""
        await asyncio.gather(*(sup.stop() for sup in self._supervisors.values()), return_exceptions=True)
        await cancel_and_wait(self._tasks.values(), STOP_TIMEOUT_S, "host supervisor")
        await asyncio.gather(*(sup.transport.close() for sup in self._supervisors.values()), return_exceptions=True)
        self._tasks.clear()

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ---- events and state
    def _publish(self, event: ClusterEvent) -> None:
        for queue in self._subscribers:
            queue.put_nowait(event)
        if self._changed is not None:
            self._changed.set()

    def events(self) -> EventSubscription:
        """Every event from this call on, in order; each call is an independent subscriber.

        The subscription starts when ``events()`` is called (not at the first ``await``), so
        calling it before ``start()`` sees every host's first state change.
        """
        subscription = EventSubscription(self._subscribers)
        self._subscribers.append(subscription.queue)
        return subscription

    def status(self) -> tuple[HostStatus, ...]:
        return tuple(sup.status() for sup in self._supervisors.values())

    def host_status(self, host: str) -> HostStatus:
        return self._sup(host).status()

    def jobs(self, host: str) -> tuple[RemoteJob, ...]:
        return tuple(self._sup(host).jobs.values())

    def agent_version(self, host: str) -> str:
        """The version the host's agent reported at its last handshake (``""`` before one)."""
        return self._sup(host).agent_version

    def warnings(self, host: str) -> list[str]:
        """What the host's agent said at its last handshake that a user must see (real GPUs it
        leaves unused because the host declares emulated ones)."""
        return self._sup(host).warnings_now()

    def fingerprint(self, host: str) -> str:
        """The unknown host key's fingerprint when ``host`` awaits trust (``host-key-unknown``/``-changed``), else ``""``."""
        return self._sup(host).fingerprint

    def ready_times(self) -> Mapping[str, float | None]:
        """Monotonic time each host first became ready (for the connect benchmark)."""
        return {name: sup.ready_at for name, sup in self._supervisors.items()}

    async def wait_settled(self, timeout: float | None = None, hosts: Sequence[str] | None = None) -> bool:
        """Wait until none of ``hosts`` (default all) is ``connecting``; False on timeout."""
        names = list(hosts) if hosts is not None else list(self._supervisors)

        async def settle() -> None:
            assert self._changed is not None
            while any(self._sup(n).state is HostState.CONNECTING for n in names):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(settle(), timeout)
            return True
        except TimeoutError:
            return False

    async def wait_for_state(self, host: str, state: HostState, timeout: float) -> bool:
        async def wait() -> None:
            assert self._changed is not None
            while self._sup(host).state is not state:
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(wait(), timeout)
            return True
        except TimeoutError:
            return False

    def reachable_address(self, host: str) -> str | None:
        """The address other hosts reach ``host`` at, as far as this machine can tell: the SSH
        config's HostName for an alias (``address = "node1"`` resolves only here); None for a
        host on no SSH transport."""
        target = getattr(self._sup(host).transport, "target", None)
        return getattr(target, "hostname", None)

    async def open_sftp(self, host: str) -> object | None:
        """An asyncssh SFTP client on the connection ``host``'s agent runs over, for the caller to
        ``exit()``; None where there is none to share (a local host, one out of reach, a server
        that refuses another session on it): the caller connects afresh."""
        start = getattr(self._sup(host).transport, "start_sftp", None)
        if start is None:
            return None
        try:
            return await start()
        except Exception:  # noqa: BLE001 - asyncssh's channel and SFTP errors: a fresh connection is the fallback
            return None

    # ---- requests
    def _sup(self, host: str) -> HostSupervisor:
        try:
            return self._supervisors[host]
        except KeyError:
            raise UnknownHost(f'unknown host "{host}"') from None

    def _client(self, host: str) -> tuple[HostSupervisor, AgentClient]:
        sup = self._sup(host)
        if sup.state is not HostState.READY or sup.client is None:
            raise HostNotReady(f"host {host} is {sup.state.value}: {sup.message}")
        return sup, sup.client

    async def launch(self, host: str, job_id: str, generation: int, argv: Sequence[str],
                     env: Mapping[str, str] | None = None, workdir: str | None = None,
                     gpus: Sequence[int] = (), log: str | None = None, visible: Sequence[int] = (),
                     log_max_bytes: int | None = None) -> RemoteJob:
        """Start a job process; returns it running (its pid, log path). See the package docstring.
        ``visible``: the GPUs it sees (``CUDA_VISIBLE_DEVICES``), ``gpus`` among them; default ``gpus``.
        ``log_max_bytes``: the log's size bound (remote/job_logs.py; the agent's default: 32 MiB)."""
        sup, client = self._client(host)
        args = {"job_id": job_id, "generation": int(generation), "argv": list(argv), "env": dict(env or {}),
                "workdir": workdir, "gpus": [int(g) for g in gpus], "log": log}
        if visible:
            args["visible"] = [int(g) for g in visible]
        if log_max_bytes is not None:
            args["log_max_bytes"] = int(log_max_bytes)
        job = RemoteJob.from_wire(host, await client.request("launch", args, self.options.request_timeout_s))
        sup.jobs[(job.job_id, job.generation)] = job
        return job

    async def stop_job(self, host: str, job_id: str, generation: int | None = None, grace_s: float = 10.0,
                       wait: bool = True) -> RemoteJob:
        """SIGTERM the job's process group, SIGKILL after ``grace_s``; with ``wait``, until it exited."""
        sup, client = self._client(host)
        args: dict[str, object] = {"job_id": job_id, "grace_s": grace_s}
        if generation is not None:
            args["generation"] = int(generation)
        job = RemoteJob.from_wire(host, await client.request("stop", args, self.options.request_timeout_s))
        if not wait or job.state == "exited":
            return job
        waiter = sup.exit_waiter(job.job_id, job.generation)
        known = sup.jobs.get((job.job_id, job.generation))
        if known is not None and known.state == "exited":
            return known
        try:
            return await asyncio.wait_for(waiter, grace_s + self.options.heartbeat_timeout_s + 5.0)
        except TimeoutError:
            raise ClusterError(f"host {host}: job {job_id} did not exit within {grace_s:g} s + SIGKILL") from None

    async def log_tail(self, host: str, job_id: str, lines: int = 50, generation: int | None = None) -> tuple[str, ...]:
        return (await self.log_file_tail(host, job_id, lines, generation))[1]

    async def log_file_tail(self, host: str, job_id: str, lines: int = 50,
                            generation: int | None = None) -> tuple[str, tuple[str, ...]]:
        """(the log file's path on the host, its last ``lines`` lines): the path is what a user
        copies the whole log with."""
        _, client = self._client(host)
        args: dict[str, object] = {"job_id": job_id, "lines": int(lines)}
        if generation is not None:
            args["generation"] = int(generation)
        result = await client.request("log_tail", args, self.options.request_timeout_s)
        return str(result.get("log") or ""), tuple(str(line) for line in result.get("lines") or ())

    async def fence(self, host: str, job_id: str, min_generation: int, grace_s: float = 10.0) -> tuple[RemoteJob, ...]:
        """Stop the job's processes older than ``min_generation`` and refuse older launches from now on."""
        _, client = self._client(host)
        result = await client.request("fence", {"job_id": job_id, "min_generation": int(min_generation),
                                                "grace_s": grace_s}, self.options.request_timeout_s)
        return tuple(RemoteJob.from_wire(host, raw) for raw in result.get("fenced") or ())

    async def reconnect(self, host: str) -> str:
        """Retry a host that is out now; a ready one has its GPUs read again. Says which."""
        return self._sup(host).read_gpus_again()

    async def trust(self, host: str, fingerprint: str) -> Recorded:
        """Record ``host``'s key (it must still have ``fingerprint``) and reconnect it now."""
        sup = self._sup(host)
        recorded = await trust_host(sup.entry, fingerprint, self.hosts_file.ssh_config,
                                    self.options.known_hosts_fallback(), self.options.connect_timeout_s)
        # every host that waits on a key looks again now: one jump host's key, trusted on the way to
        # one host, was asked about again for the next host behind it (still waiting out its backoff)
        for other in self._supervisors.values():
            if other is sup or other.state.awaits_trust:
                other.wake()
        return recorded
