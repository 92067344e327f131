"""One task per host: connect, deploy, handshake, serve, and on any failure back off and retry.

A supervisor owns its host's state and message and is the only writer of them; it publishes
every change as an event. Failures never propagate out of ``run()``: a dead host is a state,
not an exception, so it cannot delay or break the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from heet_tui.cluster.agent_bundle import agent_bundle
from heet_tui.cluster.agent_client import AgentClient
from heet_tui.cluster.errors import AgentFailure, AuthFailed, ConnectFailure, HostNotReady, Unreachable
from heet_tui.cluster.events import (
    ClusterEvent,
    EarlyEvents,
    HostChanged,
    JobExited,
    JobProgress,
    JobProgressError,
    JobsReported,
    RemoteJob,
    checked_progress,
    short_text,
    wire_generation,
)
from heet_tui.cluster.gpu_inventory import read_inventory, with_sample
from heet_tui.cluster.options import ClusterOptions
from heet_tui.cluster.transport import Transport
from heet_tui.config.hosts_file import HostEntry
from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.snapshot import HostStatus

PING_EVERY_S = 10.0
REREAD_EVERY_S = 30.0  # GPUs listed again at most this often
MAX_JOBS_KEPT = 256  # an agent keeps its live jobs and its latest 100 ended ones
GPUS_CHANGED = "the GPUs changed since they were listed"  # how the agent's heartbeat says so (inventory.py)
UNANSWERED_PINGS = 2  # in a row, while heartbeats come: the agent's request loop is stuck
SHORT_SESSION_S = 30.0  # a session that ends sooner counts towards a growing backoff (run)
# A refused login is no blip: retried every few seconds it met sshd's MaxStartups and fail2ban's
# maxretry (5 in 10 min bans the address: the login node's, or every host behind a jump host).
AUTH_RETRY_S = (60.0, 300.0, 900.0)


class HostSupervisor:
    def __init__(self, entry: HostEntry, transport: Transport, options: ClusterOptions,
                 publish: Callable[[ClusterEvent], None], connect_slots: asyncio.Semaphore,
                 notes: Callable[[str], list[str]] = lambda real_type: []) -> None:
        self.entry = entry
        self.notes = notes  # the hosts file's warnings about this host (given its real GPU type, "" if none)
        self.transport = transport
        self.options = options
        self.publish = publish
        self.slots = connect_slots
        self.client: AgentClient | None = None
        self.state = HostState.CONNECTING
        self.message = "waiting to connect"
        self.fingerprint = ""
        self.gpus: tuple[Gpu, ...] = ()
        self.gpu_source = ""
        self.warnings: list[str] = []  # what the agent says a user must see (real GPUs left unused)
        self._real_type: str | None = None  # the real GPUs' type at the last read ("" none), for the file's notes
        self.gpu_probe: str | None = None  # why the agent's last heartbeat had no fresh GPU reading
        self.workdir_problem: str | None = None  # why the agent cannot save its job table (a full disk)
        self.agent_version = ""
        self.rtt_ms: float | None = None
        self.last_seen: float | None = None
        self.jobs: dict[tuple[str, int], RemoteJob] = {}
        self.ready_at: float | None = None  # monotonic time it first became ready (benchmarks)
        self._wake = asyncio.Event()
        self._exit_waiters: dict[tuple[str, int], list[asyncio.Future[RemoteJob]]] = {}
        # Job events that arrive while connecting (an adopting agent reports exits before its
        # hello reply): published once the host is ready, after the JobsReported that covers them,
        # so that nobody acts on them while requests to the host still fail.
        self._early = EarlyEvents()
        self._stopping = False
        self._pings_unanswered = 0  # pings in a row with no reply in time (_serve)
        self._rereading = False  # the GPUs are being listed again (_reread_gpus)
        self._reread_after = 0.0  # monotonic time before which they are not (an agent said so at every heartbeat)

    # ---- state
    def status(self) -> HostStatus:
        known = {g.index for g in self.gpus}  # a host's claim of GPUs it lacks read "1024/2 GPUs in use"
        gpu_jobs = tuple(sorted((g, j.job_id) for j in self.jobs.values() if j.running for g in j.gpus if g in known))
        # a ready host's message is made afresh: its notes follow the hosts file (a speed clash
        # noted when the GPUs were read stayed in the TUI after the other host left the file)
        message = self._ready_message() if self.state is HostState.READY else self.message
        return HostStatus(name=self.entry.name, state=self.state, message=message, gpus=self.gpus,
                          rack=self.entry.rack, gpu_source=self.gpu_source, last_seen=self.last_seen,
                          rtt_ms=self.rtt_ms, gpu_jobs=gpu_jobs,
                          declared_type=self.entry.declared_type or "", launch_blocked=self._launch_blocked(),
                          warnings=tuple(self.warnings_now()) if self.state is HostState.READY else ())

    def warnings_now(self) -> list[str]:
        """The agent's warnings and the hosts file's notes as the file is now: noted at the GPUs'
        read, a speed clash stayed after the other host was removed from the file."""
        return [*self.warnings, *(self.notes(self._real_type) if self._real_type is not None else ())]

    def _real_type_is(self, real_type: str) -> list[str]:  # read_inventory's notes: kept for warnings_now
        self._real_type = real_type
        return []

    def _launch_blocked(self) -> str:
        """Why nothing is launched here now. GPUs that cannot be read are not known free: a job was
        placed on a GPU the driver called lost, and another beside someone's notebook."""
        if self.workdir_problem:
            return self.workdir_problem
        if self.gpu_probe and self.gpus and self.gpu_probe.startswith(GPUS_CHANGED):
            return (f"{self.gpu_probe}; they are listed again once no heet job runs here, and nothing is "
                    "launched here until then")
        if self.gpu_probe and self.gpus:
            return f"GPUs not read: {self.gpu_probe}; jobs run on, nothing is launched here until they are"
        return ""

    def _ready_message(self) -> str:
        warnings = "".join(f"; {w}" for w in self.warnings_now())
        probe = f"; GPUs not read: {self.gpu_probe}" if self.gpu_probe else ""
        if probe and self.gpus and not self.workdir_problem:
            probe += "; jobs run on, nothing is launched here until they are"
        full = (f"; the agent {self.workdir_problem}: jobs run on, nothing is launched here until it can"
                if self.workdir_problem else "")
        return f"ready: {len(self.gpus)} GPU(s) ({self.gpu_source}), agent {self.agent_version}{warnings}{probe}{full}"

    def _set(self, state: HostState, message: str) -> None:
        self.state, self.message = state, message
        if state is HostState.READY and self.ready_at is None:
            self.ready_at = time.monotonic()
        self.publish(HostChanged(self.entry.name, self.status()))

    # ---- loop
    async def run(self) -> None:
        """Connect, serve until the link fails, back off, repeat; returns only after ``stop()``."""
        attempt = refused = short = 0
        while not self._stopping:
            outcome = await self._attempt(attempt)
            if isinstance(outcome, ConnectFailure):
                attempt += 1
                refused = refused + 1 if isinstance(outcome, AuthFailed) else 0
                self.fingerprint = getattr(outcome, "fingerprint", "")
                wait = AUTH_RETRY_S[min(refused, len(AUTH_RETRY_S)) - 1] if refused else None
                later = (f"; tried again in {wait / 60:g} min (sshd and fail2ban ban addresses that keep failing); "
                         "c on the Cluster screen reconnects now") if wait and not self.options.check_only else ""  # hosts check ends here
                self._set(outcome.state, str(outcome) + later)
                await self._backoff(attempt, wait)
                continue
            attempt, self.fingerprint = 0, ""
            served_from = time.monotonic()
            failure = await self._serve(outcome)
            # an agent that fails each session at once (a line it should not send) was logged in to
            # twice a second for ever: sessions that end this soon back off as failed connects do
            short = short + 1 if time.monotonic() - served_from < SHORT_SESSION_S else 0
            self.client = None
            self._fail_waiters(failure)
            if not self._stopping:
                self._set(failure.state, str(failure))  # before closing, which may wait on a hung link
            await outcome.close()
            await self.transport.close()
            if not self._stopping:
                await self._backoff(1 + short)

    async def _attempt(self, attempt: int) -> AgentClient | ConnectFailure:
        """One connection attempt, holding one of the cluster's connect slots."""
        limit = self.options.connect_timeout_s * 2
        try:
            async with self.slots:
                # why again: a hung host flipped between "connecting (attempt 4)", no reason, and "timed out"
                last = f"; the last one: {self.message.split('; tried again in')[0]}" if attempt and self.message else ""
                self._set(HostState.CONNECTING, f"connecting (attempt {attempt + 1}{last})" if attempt else "connecting")
                return await asyncio.wait_for(self._connect(), limit)
        except ConnectFailure as exc:
            failure: ConnectFailure = exc
        except TimeoutError:
            failure = Unreachable(f"connect, deploy and handshake took longer than {limit:g} s")
        except HostNotReady as exc:  # the agent went while answering the handshake: the agent's, said as such
            failure = AgentFailure(str(exc).removeprefix(f"host {self.entry.name}: "))
        except Exception as exc:  # a bug or an unexpected library error must not kill the supervisor
            failure = AgentFailure(f"unexpected error: {type(exc).__name__}: {exc}")
        await self.transport.close()
        return failure

    async def _connect(self) -> AgentClient:
        self._early = EarlyEvents()
        channel = await self.transport.open(agent_bundle())
        client = AgentClient(channel, self.entry.name, self._on_event, self.transport.connected)
        emulate = self.entry.emulate
        hello: dict[str, Any] = {
            "host": self.entry.name,
            "owner": self.options.owner,
            "session": self.options.session,
            "previous_session": self.options.previous_session,
            "heartbeat_s": self.options.heartbeat_s,
            "probe_limit_s": self.options.connect_timeout_s * 2 / 3,  # a stuck GPU reading fails in time to say so
            "probes": list(self.options.probes),
            "gpu_read_limit_s": self.options.gpu_read_limit_s,
            "emulate": None if emulate is None else
            {"gpu_type": emulate.gpu_type, "count": emulate.count, "speed": emulate.speed},
        }
        try:
            result = await client.handshake(hello, self.options.connect_timeout_s)
            started = time.monotonic()
            await client.request("ping", {}, self.options.connect_timeout_s)
            self.rtt_ms = round((time.monotonic() - started) * 1000.0, 2)
        except BaseException:
            await client.close()
            raise
        self._apply_hello(result)
        self.client = client
        self.last_seen = time.time()
        self.gpu_probe, self.workdir_problem = None, short_text(result.get("workdir_problem"))
        self._set(HostState.READY, self._ready_message())
        self.publish(JobsReported(self.entry.name, tuple(self.jobs.values())))
        early, self._early = self._early.events, EarlyEvents()
        for message in early:
            self._on_event(message)
        return client

    def _apply_hello(self, result: dict[str, Any]) -> None:
        inventory = result.get("inventory") or {}
        self.agent_version = f"{result.get('agent_version', '')}+{agent_bundle().digest[:8]}"  # each build's said 0.1.0
        self.gpu_source, self.gpus, self.warnings = read_inventory(self.entry, inventory, self._real_type_is)
        self.jobs = {}
        for raw in result.get("jobs") or ():
            self._keep(RemoteJob.from_wire(self.entry.name, raw))

    async def _serve(self, client: AgentClient) -> ConnectFailure:
        """Wait until the link fails or goes silent; return why."""
        last_ping = awake = time.monotonic()
        resumed, self._pings_unanswered = 0.0, 0
        while not self._stopping:
            wait = min(1.0, self.options.heartbeat_timeout_s / 4)
            with contextlib.suppress(asyncio.TimeoutError):
                return await asyncio.wait_for(asyncio.shield(client.closed), wait)
            now = time.monotonic()
            if now - awake > wait + self.options.heartbeat_timeout_s / 2:
                # The controller itself did not run (kill -STOP, a suspended laptop, a starved box):
                # the agent's heartbeats wait unread in the pipe. Judged as the hosts' silence,
                # every host was "out" at once after a pause of the controller's own.
                resumed = now
            awake = now
            silent = now - max(client.last_message, resumed)
            if silent > self.options.heartbeat_timeout_s:
                return Unreachable(f"no heartbeat for {silent:.0f} s")
            if self._pings_unanswered >= UNANSWERED_PINGS:  # it stayed "ready" while every launch timed out
                return AgentFailure(f"the agent sends heartbeats but answered none of {UNANSWERED_PINGS} pings "
                                    f"in {self._ping_timeout():g} s each: its requests are stuck")
            if time.monotonic() - last_ping > PING_EVERY_S:
                last_ping = time.monotonic()
                asyncio.ensure_future(self._ping(client))
        return Unreachable("cluster stopped")

    def _ping_timeout(self) -> float:  # ten round trips: at 2 s and 20 % loss, 10 s called a live agent stuck
        return max(self.options.heartbeat_timeout_s, 10 * (self.rtt_ms or 0.0) / 1000.0)

    async def _ping(self, client: AgentClient) -> None:
        started = time.monotonic()
        try:
            await client.request("ping", {}, self._ping_timeout())
        except HostNotReady:
            # no reply in time on a live link that went on talking (a closed one is said elsewhere),
            # and not a pause of the controller's own: its timer then fires late, replies unread
            waited = time.monotonic() - started
            if not client.closed.done() and client.last_message > started \
                    and waited < 1.5 * self._ping_timeout():
                self._pings_unanswered += 1
            return
        except Exception:  # noqa: BLE001 - a refused ping is an answer
            return
        self._pings_unanswered = 0
        self.rtt_ms = round((time.monotonic() - started) * 1000.0, 2)

    async def _backoff(self, attempt: int, fixed_s: float | None = None) -> None:
        delay = fixed_s if fixed_s is not None else self.options.backoff_s(attempt, random.uniform(0.5, 1.0))
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    def read_gpus_again(self) -> str:
        """A ready host's GPUs listed again on request (``c``): one whose GPUs could not be read
        (nvidia-ml-py missing, a hung NVML call since fixed) was never read again, and ``c`` said
        "nothing to reconnect"; an edit of its hosts entry was the only way."""
        name = self.entry.name
        if self.client is None or self.state is not HostState.READY:
            self.wake()
            return f"reconnecting {name}"
        if any(j.running for j in self.jobs.values()):  # jobs hold GPUs by their numbers (_on_heartbeat)
            return f"{name} is connected; its GPUs are listed again when no heet job runs there"
        if not self._rereading:
            self._start_reread(self.client, "read again by hand")
        return f"{name} is connected: reading its GPUs again"

    def wake(self) -> None:
        """Retry now instead of waiting out the backoff (after ``trust_host``, or a user's retry)."""
        self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self.client is not None:
            await self.client.close()

    # ---- agent events
    def _on_event(self, message: dict[str, Any]) -> None:
        self.last_seen = time.time()
        name = message.get("event")
        if name in ("progress", "progress_error", "job_exit") and self.state is not HostState.READY:
            self._early.add(message)  # bounded: a host streaming events before its hello took 460 MB
            return
        if name == "heartbeat":
            self._on_heartbeat(message)
        elif name == "progress" and isinstance(message.get("progress"), dict):
            key = (str(message.get("job_id")), wire_generation(message.get("generation") or 0))
            event = checked_progress(self.entry.name, key[0], key[1], message["progress"])
            if isinstance(event, JobProgress) and (job := self.jobs.get(key)) is not None:
                self.jobs[key] = replace(job, progress=event.progress)
            self.publish(event)
        elif name == "progress_error":
            self.publish(JobProgressError(self.entry.name, str(message.get("job_id")),
                                          wire_generation(message.get("generation") or 0), str(message.get("line", ""))[:300],
                                          str(message.get("error", ""))[:200]))
        elif name == "job_exit":
            job = RemoteJob.from_wire(self.entry.name, message)
            self._keep(job)
            self.publish(JobExited(self.entry.name, job))
            for future in self._exit_waiters.pop((job.job_id, job.generation), []):
                if not future.done():
                    future.set_result(job)

    def _on_heartbeat(self, message: dict[str, Any]) -> None:
        probe, full = (short_text(message.get(key)) for key in ("gpu_probe", "workdir_problem"))
        if (probe, full) != (self.gpu_probe, self.workdir_problem):  # a hung nvidia-smi is how a GPU
            self.gpu_probe, self.workdir_problem = probe, full  # falling off the bus first shows
            if self.state is HostState.READY:
                self.message = self._ready_message()
        self.gpus = with_sample(self.gpus, message.get("gpus"))
        for raw in message.get("jobs") or ():  # a bad entry: the event is left out, said once (agent_client)
            self._keep(RemoteJob.from_wire(self.entry.name, raw))
        # Listed again only with no heet job running here: jobs hold GPUs by the old numbers, and
        # renumbered under them, screens and plans put each job on its neighbour's GPU. Meanwhile
        # the agent's readings follow each GPU by UUID, and nothing is launched here.
        if message.get("gpus_changed") is True and self.client is not None and not self._rereading \
                and not any(j.running for j in self.jobs.values()) and time.monotonic() >= self._reread_after:
            self._reread_after = time.monotonic() + REREAD_EVERY_S
            self._start_reread(self.client, probe or "the GPUs changed")
        if self.state is HostState.READY:
            self.publish(HostChanged(self.entry.name, self.status()))

    def _keep(self, job: RemoteJob) -> None:
        """Record an agent's job, holding at most ``MAX_JOBS_KEPT`` (ended ones go first): a
        compromised agent reported thousands of new ended jobs a second, and the table, walked at
        every heartbeat, grew to 686 MB until the next reconnect."""
        key = (job.job_id, job.generation)
        if key not in self.jobs and len(self.jobs) >= MAX_JOBS_KEPT:
            ended = [k for k, j in self.jobs.items() if not j.running]
            for old in ended[:max(1, len(self.jobs) - MAX_JOBS_KEPT + 1)]:
                del self.jobs[old]
            if len(self.jobs) >= MAX_JOBS_KEPT:
                return  # that many running: the agent's own table holds no more
        self.jobs[key] = job

    def _start_reread(self, client: AgentClient, change: str) -> None:
        self._rereading = True
        asyncio.ensure_future(self._reread_gpus(client, change))

    async def _reread_gpus(self, client: AgentClient, change: str) -> None:
        """List the GPUs again after the agent saw them change (one fell off the bus, the driver
        numbered the rest anew): plans held the old list, and handed out GPUs that were gone.
        Launches stay blocked until a heartbeat reads the new list as it is."""
        try:
            result = await client.request("inventory", {}, self.options.connect_timeout_s)
        except Exception:  # noqa: BLE001 - tried again at the next heartbeat that says so
            return
        finally:
            self._rereading = False
        if client is not self.client:
            return
        self.gpu_source, self.gpus, self.warnings = read_inventory(self.entry, result, self._real_type_is)
        self.warnings.append(f"at {time.strftime('%H:%M:%S')} {change}: listed them again")
        if self.state is HostState.READY:
            self._set(HostState.READY, self._ready_message())

    def exit_waiter(self, job_id: str, generation: int) -> asyncio.Future[RemoteJob]:
        future: asyncio.Future[RemoteJob] = asyncio.get_running_loop().create_future()
        self._exit_waiters.setdefault((job_id, generation), []).append(future)
        return future

    def _fail_waiters(self, failure: ConnectFailure) -> None:
        waiters, self._exit_waiters = self._exit_waiters, {}
        for futures in waiters.values():
            for future in futures:
                if not future.done():
                    future.set_exception(HostNotReady(f"host {self.entry.name}: {failure}"))
