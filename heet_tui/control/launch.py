"""Turn (job, allocation, generation) into one process launch per GPU, with the torch.distributed env.

Pure: the controller sends the result through the cluster layer. Ranks are numbered host by
host in allocation order, so rank 0 (the one that writes checkpoints and reports progress)
lives on the first host, which is also ``MASTER_ADDR``.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.runtime import profile_agent_id, rank_agent_id
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import DEFAULT_STOP_GRACE_S, JobSpec, TargetKind

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PORT_RANGE = (29500, 49500)


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    host: str
    agent_id: str
    rank: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    gpus: tuple[int, ...]
    workdir: str | None
    # CUDA_VISIBLE_DEVICES: the job's GPUs on the host, in LOCAL_RANK order (torchrun's contract:
    # scripts call torch.cuda.set_device(LOCAL_RANK)); empty means just ``gpus``
    visible: tuple[int, ...] = ()


def checkpoint_dir(job_id: str, spec: JobSpec, host: HostEntry, store_id: str = "",
                   reported: str | None = None) -> str:
    """Where the job's checkpoints live: the spec's ``checkpoint_dir``, else one under the host's
    workdir named after the job and the state store (``small-cnn.4a146a78``).

    Job ids are unique only within a store, so a dir named after the job alone was claimed by
    an older store's job of the same name (a deleted state dir), and the agent refused it. A
    job that already ``reported`` a checkpoint in such a dir (it started before dirs named the
    store) keeps it, so its progress is not lost.
    """
    if spec.checkpoint_dir:
        return spec.checkpoint_dir
    plain = f"{host.workdir.rstrip('/')}/checkpoints/{job_id}"
    if not store_id or (reported and f"/checkpoints/{job_id}/" in reported):
        return plain
    return f"{plain}.{store_id[:8]}"


def host_argv(command: tuple[str, ...], host: HostEntry) -> tuple[str, ...]:
    """A spec's ``python3 script.py`` runs with the interpreter the hosts file names for that host."""
    if command and command[0] in ("python", "python3"):
        return (host.python, *command[1:])
    return command


def master_address(host: HostEntry, one_host: bool, reachable: str | None = None) -> str:
    """Where rank 0 listens. All ranks on one host: loopback, which always works. Across hosts:
    the name the other hosts resolve. It was the hosts file's ``address`` always, which for an
    SSH-config alias ("node1") resolves on the login node only: every rank of every job of two
    or more GPUs there looped on "node1 cannot be retrieved" until the stall timeout, and the
    size was then blamed ("crashed before its first report")."""
    if host.transport == "local" or one_host:
        return "127.0.0.1"
    return reachable or host.address


def choose_master_port(job_id: str, generation: int, first: HostEntry, owner: str = "") -> int:
    """A free port on the first host.

    For this machine (local transport or a loopback address) the OS picks one. For a remote
    host the agent offers no port probe, so the port is derived from (state store, job,
    generation) inside a range kept clear of the ephemeral ports; a clash makes rank 0 fail to
    bind, which is a crash, and the retry comes with a new generation and therefore a new port.
    The store counts: two users' jobs named "train" both reached generation 2 on one host, and
    each crashed the other at the same port.
    """
    if first.transport == "local" or first.address in LOOPBACK:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    digest = int(hashlib.sha256(f"{owner}/{job_id}/{generation}".encode()).hexdigest()[:8], 16)
    return PORT_RANGE[0] + digest % (PORT_RANGE[1] - PORT_RANGE[0])


def target_env(spec: JobSpec, stop_grace_s: float = DEFAULT_STOP_GRACE_S) -> dict[str, str]:
    """The job's target, global batch and stop grace, for scripts (like examples/training.py)
    that read them."""
    env = {"HEET_BATCH_SIZE": str(spec.batch_size), "HEET_STOP_GRACE": f"{stop_grace_s:g}"}
    value = spec.target.value
    shown = str(int(value)) if float(value).is_integer() else repr(value)
    env[{TargetKind.STEPS: "HEET_TARGET_STEPS", TargetKind.SAMPLES: "HEET_TARGET_SAMPLES",
         TargetKind.EPOCHS: "HEET_TARGET_EPOCHS"}[spec.target.kind]] = shown
    if spec.dataset_samples:
        env["HEET_DATASET_SAMPLES"] = str(spec.dataset_samples)
    return env


def plan_launch(job_id: str, spec: JobSpec, alloc: Allocation, generation: int,
                hosts: Mapping[str, HostEntry], master_port: int, owner: str = "",
                reported_checkpoint: str | None = None, stop_grace_s: float = DEFAULT_STOP_GRACE_S,
                address_of: Callable[[str], str | None] | None = None) -> list[LaunchSpec]:
    """One launch per rank. ``owner`` (the state store's id) names the ranks' processes
    (``rank_agent_id``) and lets the agents refuse a checkpoint directory that another store's
    job has used. ``address_of``: a host's address as the other hosts reach it (master_address)."""
    if not alloc.hosts:
        raise ValueError(f"job {job_id}: empty allocation")
    missing = [h for h in alloc.host_names if h not in hosts]
    if missing:
        raise ValueError(f"job {job_id}: allocation names unknown host(s) {', '.join(missing)}")
    first = hosts[alloc.hosts[0][0]]
    world = alloc.num_gpus
    common = dict(spec.env) | target_env(spec, stop_grace_s) | {
        "WORLD_SIZE": str(world), "MASTER_PORT": str(master_port),
        "MASTER_ADDR": master_address(first, len(alloc.hosts) == 1, address_of(first.name) if address_of else None),
        "HEET_CHECKPOINT_DIR": checkpoint_dir(job_id, spec, first, owner, reported_checkpoint),
    } | ({"HEET_CHECKPOINT_OWNER": owner} if owner else {})
    out, rank = [], 0
    for host_name, gpus in alloc.hosts:
        host = hosts[host_name]
        for local_rank, gpu in enumerate(gpus):
            env = common | {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(len(gpus))}
            out.append(LaunchSpec(host_name, rank_agent_id(job_id, rank, owner), rank, host_argv(spec.command, host),
                                  tuple(sorted(env.items())), (gpu,), spec.workdir or None, tuple(gpus)))
            rank += 1
    return out


def plan_profile_launch(job_id: str, spec: JobSpec, host: HostEntry, gpu: int, n: int,
                        owner: str = "", stop_grace_s: float = DEFAULT_STOP_GRACE_S,
                        max_s: float | None = None) -> LaunchSpec:
    """A single-GPU run of the job's own command, stopped after a few reports.

    Each run gets a scratch checkpoint dir of its own, which the agent creates and removes when
    the run ends: a job is profiled on several types at once, and hosts often share a workdir
    (an NFS home, the bundled local config), where one shared dir let the newest run fence the
    others. The store id in the run's name keeps another store's runs out of it.

    ``max_s`` bounds the run on its host (``HEET_RUN_MAX_S``, remote/jobwrap.py): the controller
    stops it after a few reports, and with the controller killed it trained the job's whole
    target unwatched, its work thrown away, for as long as the controller stayed down.
    """
    agent_id = profile_agent_id(job_id, n, owner)
    scratch = f"{host.workdir.rstrip('/')}/profiling/{agent_id}"
    env = dict(spec.env) | target_env(spec, stop_grace_s) | {
        "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "HEET_CHECKPOINT_DIR": scratch, "HEET_CHECKPOINT_SCRATCH": "1", "HEET_PROFILING": "1",
    } | ({"HEET_CHECKPOINT_OWNER": owner} if owner else {}) | ({"HEET_RUN_MAX_S": f"{max_s:g}"} if max_s else {})
    return LaunchSpec(host.name, agent_id, 0, host_argv(spec.command, host),
                      tuple(sorted(env.items())), (gpu,), spec.workdir or None)
