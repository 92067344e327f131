"""The cluster layer: connect to every host, deploy the agent, run and supervise job processes.

Public API (stable; the controller builds on exactly this)::

    from heet_tui.cluster import Cluster, ClusterOptions, HostChanged, JobsReported, JobProgress, JobExited

    cluster = Cluster(hosts_file, ClusterOptions())    # hosts_file: heet_tui.config.hosts_file.HostsFile
    await cluster.start()                              # one HostSupervisor task per host; returns at once
    events = cluster.events()                          # ONE stream of ClusterEvent; each call is a subscriber
    async for event in events: ...                     #   that sees every event from the call on (close() ends it)
    await cluster.wait_settled(timeout=30)             # until no host is "connecting" (optional)
    await cluster.wait_for_state(name, HostState.READY, timeout=10)
    cluster.status()                                   # tuple[HostStatus, ...] in hosts-file order
    cluster.host_status(name)                          # one HostStatus
    cluster.jobs(name)                                 # tuple[RemoteJob, ...]: the agent's last job list
    cluster.agent_version(name); cluster.fingerprint(name)   # fingerprint: when host-key-unknown
    job = await cluster.launch(host, job_id, generation, argv, env={}, workdir=None, gpus=(), log=None)
    job = await cluster.stop_job(host, job_id, generation=None, grace_s=10.0, wait=True)
    lines = await cluster.log_tail(host, job_id, lines=50)
    fenced = await cluster.fence(host, job_id, min_generation, grace_s=10.0)
    await cluster.reconnect(host)                      # retry now instead of waiting out the backoff
    await cluster.trust(host, fingerprint)             # record an approved host key, then reconnect
    await cluster.add_host(entry); await cluster.remove_host(name)   # the hosts file changed while running
    await cluster.stop()                               # closes connections; jobs keep running on hosts
                                                       #   (subscriptions stay open: cancel their readers)

Events (``heet_tui.cluster.events``): ``HostChanged(host, status)`` on every state change and
heartbeat; ``JobsReported(host, jobs)`` after every (re)connect, including jobs a restarted agent
re-adopted and jobs that ended meanwhile; ``JobProgress(host, job_id, generation, progress)``
with the job's latest ``@heet-progress`` line (at most one per job every 0.25 s: the agent
forwards the newest); ``JobProgressError(host, job_id, generation, line, error)`` once per job
process that prints a line with the progress prefix that is not a progress line;
``JobExited(host, job)`` when a job process ends.

Requests raise ``HostNotReady`` (host not ready), ``UnknownHost``, or ``AgentRequestError`` (the
agent refused: bad arguments, job already running, generation fenced). Launch semantics: the
job gets ``HEET_JOB_ID``, ``HEET_GENERATION``, ``CUDA_VISIBLE_DEVICES`` (from ``visible``, else ``gpus``) or, on
emulated hosts, ``HEET_EMULATED_SPEED`` and ``HEET_EMULATED_GPUS`` (``CUDA_VISIBLE_DEVICES`` empty); everything else (``RANK``, ``MASTER_ADDR``,
``HEET_CHECKPOINT_DIR``...) comes in ``env``. ``workdir=None`` runs the job in the agent's
state directory on the host; ``log=None`` writes ``<state>/logs/<job>-g<generation>.log``.
``stop_job(wait=True)`` returns the exited job (exit code or signal) or raises ``ClusterError``
when it outlives grace + SIGKILL, ``HostNotReady`` when the link drops meanwhile. ``fence(host, job, g)`` stops every process of the
job with a generation below ``g`` and makes the agent refuse to launch one later.

Host states (``heet_tui.core.host.HostState``) with a human message each: connecting, ready,
unreachable, auth-failed, host-key-unknown or host-key-changed (message carries the SHA256 fingerprint; see
``trust_host``), agent-error. A failing host retries with jittered exponential backoff and never
delays the others; connection attempts run concurrently up to ``ClusterOptions.max_connects``.
"""

from heet_tui.cluster.cluster import Cluster, EventSubscription
from heet_tui.cluster.errors import (
    AgentRequestError,
    ClusterError,
    HostKeyUnknown,
    HostNotReady,
    UnknownHost,
)
from heet_tui.cluster.events import (
    ClusterEvent,
    HostChanged,
    JobExited,
    JobProgress,
    JobProgressError,
    JobsReported,
    RemoteJob,
)
from heet_tui.cluster.hostkeys import fetch_host_key_fingerprint, trust_host
from heet_tui.cluster.options import ClusterOptions

__all__ = [
    "AgentRequestError",
    "Cluster",
    "ClusterError",
    "ClusterEvent",
    "ClusterOptions",
    "EventSubscription",
    "HostChanged",
    "HostKeyUnknown",
    "HostNotReady",
    "JobExited",
    "JobProgress",
    "JobProgressError",
    "JobsReported",
    "RemoteJob",
    "UnknownHost",
    "fetch_host_key_fingerprint",
    "trust_host",
]
