"""The cluster layer: connect to every host, deploy the agent, run and supervise job processes.

Public API (stable; the controller builds on exactly this)::

    from heet_tui.cluster import Cluster, ClusterOptions, HostChanged, JobsReported, JobProgress, JobExited

    cluster = Cluster(hosts_file, ClusterOptions())    # hosts_file: heet_tui.config.hosts_file.HostsFile
    await cluster.start()                              # one HostSupervisor task per host; returns at once
    async for event in cluster.events():               # ONE stream of ClusterEvent (each call = a subscriber
        ...                                            #   that sees every event from the moment it subscribed)
    await cluster.wait_settled(timeout=30)             # until no host is "connecting" (optional)
    cluster.status()                                   # tuple[HostStatus, ...] in hosts-file order
    cluster.host_status(name)                          # one HostStatus
    cluster.jobs(name)                                 # tuple[RemoteJob, ...]: the agent's last job list
    job = await cluster.launch(host, job_id, generation, argv, env={}, workdir=None, gpus=(), log=None)
    job = await cluster.stop_job(host, job_id, generation=None, grace_s=10.0, wait=True)
    lines = await cluster.log_tail(host, job_id, lines=50)
    fenced = await cluster.fence(host, job_id, min_generation, grace_s=10.0)
    await cluster.reconnect(host)                      # retry now instead of waiting out the backoff
    await cluster.stop()                               # closes connections; jobs keep running on hosts

Events (``heet_tui.cluster.events``): ``HostChanged(host, status)`` on every state change and
heartbeat; ``JobsReported(host, jobs)`` after every (re)connect, including jobs a restarted agent
re-adopted and jobs that ended meanwhile; ``JobProgress(host, job_id, generation, progress)``
for each progress line; ``JobExited(host, job)`` when a job process ends.

Requests raise ``HostNotReady`` (host not ready), ``UnknownHost``, or ``AgentRequestError`` (the
agent refused: bad arguments, job already running, generation fenced). Launch semantics: the
job gets ``HEET_JOB_ID``, ``HEET_GENERATION``, ``CUDA_VISIBLE_DEVICES`` (from ``gpus``) and, on
emulated hosts, ``HEET_EMULATED_SPEED``; everything else (``RANK``, ``MASTER_ADDR``,
``HEET_CHECKPOINT_DIR``...) comes in ``env``. ``fence(host, job, g)`` stops every process of the
job with a generation below ``g`` and makes the agent refuse to launch one later.

Host states (``heet_tui.core.host.HostState``) with a human message each: connecting, ready,
unreachable, auth-failed, host-key-unknown (message carries the SHA256 fingerprint; see
``trust_host``), agent-error. A failing host retries with jittered exponential backoff and never
delays the others; connection attempts run concurrently up to ``ClusterOptions.max_connects``.
"""

from heet_tui.cluster.cluster import Cluster
from heet_tui.cluster.errors import (
    AgentRequestError,
    ClusterError,
    HostKeyUnknown,
    HostNotReady,
    UnknownHost,
)
from heet_tui.cluster.events import ClusterEvent, HostChanged, JobExited, JobProgress, JobsReported, RemoteJob
from heet_tui.cluster.hostkeys import fetch_host_key_fingerprint, trust_host
from heet_tui.cluster.options import ClusterOptions

__all__ = [
    "AgentRequestError",
    "Cluster",
    "ClusterError",
    "ClusterEvent",
    "ClusterOptions",
    "HostChanged",
    "HostKeyUnknown",
    "HostNotReady",
    "JobExited",
    "JobProgress",
    "JobsReported",
    "RemoteJob",
    "UnknownHost",
    "fetch_host_key_fingerprint",
    "trust_host",
]
