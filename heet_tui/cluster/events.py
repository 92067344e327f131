"""What the cluster layer reports: typed events on one stream, and the agent's view of a job."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from heet_agent.progress import check_progress

from heet_tui.core.snapshot import HostStatus


@dataclass(frozen=True, slots=True)
class RemoteJob:
    """A job process as the host's agent sees it.

    ``state`` is ``running``, ``stopping`` (SIGTERM sent, waiting out the grace period) or
    ``exited``. For an exited job ``exit_code`` is the process's code, or ``None`` when it died
    of ``signal``; ``reason`` says why it stopped (``stopped``, ``fenced``, ``failed to start:
    ...``, ``lost ...``) when the agent knows. ``adopted`` is true when a restarted agent found
    the job still running from before. ``progress`` is the latest parsed progress line.
    """

    host: str
    job_id: str
    generation: int
    state: str
    pid: int = 0
    gpus: tuple[int, ...] = ()
    log: str = ""
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    adopted: bool = False
    progress: dict[str, Any] | None = None
    ended_ago_s: float | None = None  # for an exited job: how long before the report it ended

    @property
    def running(self) -> bool:
        return self.state != "exited"

    @property
    def succeeded(self) -> bool:
        return self.state == "exited" and self.exit_code == 0

    @staticmethod
    def from_wire(host: str, data: dict[str, Any]) -> RemoteJob:
        """Raises ValueError for what no agent of ours sends: a compromised host's generation of 2**63
        went into the store as a float and failed every plan after ("Python int too large to convert
        to SQLite INTEGER"), and a list of 120,000 GPUs read "GPUs 120000/4 busy"."""
        progress = data.get("progress")
        gpus = data.get("gpus") or ()
        if not isinstance(gpus, (list, tuple)) or len(gpus) > MAX_GPUS or not all(
                isinstance(g, int) and not isinstance(g, bool) and 0 <= g < MAX_GPUS for g in gpus):
            raise ValueError(f"a job's gpus are not up to {MAX_GPUS} GPU indices")
        return RemoteJob(
            host=host,
            job_id=str(data.get("job_id", ""))[:MAX_JOB_ID],
            generation=wire_generation(data.get("generation", 0)),
            state=str(data.get("state", "exited"))[:20],
            pid=int(data.get("pid") or 0),
            gpus=tuple(gpus),
            log=str(data.get("log") or ""),
            exit_code=data.get("exit_code") if isinstance(data.get("exit_code"), int) else None,
            signal=data.get("signal") if isinstance(data.get("signal"), int) else None,
            reason=data.get("reason") if isinstance(data.get("reason"), str) else None,
            adopted=bool(data.get("adopted")),
            progress=check_progress(progress)[0],  # as a progress event's: a corrupted agent's NaN broke rounds
            ended_ago_s=_age(data.get("ended_ago_s")),
        )


MAX_GENERATION = 2**31 - 1  # far beyond any job's restarts, and within SQLite's integers
MAX_GPUS = 1024  # indices and count of one host's GPUs
MAX_JOB_ID = 256


def wire_generation(value: Any) -> int:
    """A generation an agent reported; ValueError when it is none an agent of ours could send."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GENERATION:
        raise ValueError(f"generation {str(value)[:30]!r} is not a whole number from 0 to {MAX_GENERATION}")
    return value


def _age(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


@dataclass(frozen=True, slots=True)
class HostChanged:
    """A host's state, message, GPUs or round-trip time changed (or a heartbeat refreshed them)."""

    host: str
    status: HostStatus


@dataclass(frozen=True, slots=True)
class JobProgressError:
    """A job printed a line with the progress prefix that is not a progress line (sent once per process)."""

    host: str
    job_id: str
    generation: int
    line: str
    error: str


@dataclass(frozen=True, slots=True)
class JobsReported:
    """The full job list of a host's agent, sent on every (re)connect.

    After a reconnect this is how the controller learns which jobs survived (``adopted``) and
    which ended while it was away (``state == "exited"`` with their exit status).
    """

    host: str
    jobs: tuple[RemoteJob, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class JobProgress:
    """A new ``@heet-progress`` line from a job (already parsed by ``heet_agent.progress``)."""

    host: str
    job_id: str
    generation: int
    progress: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobExited:
    """A job process ended (on its own, stopped, fenced, or found ended after a reconnect)."""

    host: str
    job: RemoteJob


ClusterEvent = HostChanged | JobsReported | JobProgress | JobProgressError | JobExited


def checked_progress(host: str, job_id: str, generation: int, progress: dict[str, Any]) -> JobProgress | JobProgressError:
    """A report an agent forwarded, checked again here: a corrupted agent's NaN speed (None once
    read) raised in every controller round, and planning stopped."""
    valid, why = check_progress(progress)
    if valid is None:
        return JobProgressError(host, job_id, generation, json.dumps(progress)[:300],
                                f"the agent forwarded a report that is not valid: {why}")
    return JobProgress(host, job_id, generation, valid)


def short_text(value: Any) -> str | None:
    """A heartbeat's optional text field: None when absent or empty, cut to a message's length."""
    return str(value)[:300] if isinstance(value, str) and value else None


class EarlyEvents:
    """A host's events kept until its hello is answered, bounded in count and in size: 1,000 of
    the protocol's 1 MiB lines came to 1 GiB at every reconnect of a compromised host."""

    MAX_COUNT = 1000
    MAX_BYTES = 16 << 20

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._bytes = 0

    def add(self, message: dict[str, Any]) -> None:
        size = len(repr(message)) if len(self.events) < self.MAX_COUNT else 0
        if size and self._bytes + size <= self.MAX_BYTES:
            self.events.append(message)
            self._bytes += size
