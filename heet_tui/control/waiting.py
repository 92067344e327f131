"""Why a queued job cannot start on the cluster as it is now.

A job that asks for a GPU type no ready host has, or for more GPUs of one type than the
cluster holds, gets no plan and, without a word, looks like it is waiting for its turn. The
controller puts the reason in the job's message, and takes it back once a host that can hold
the job is ready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heet_tui.core.job import CANNOT_START, JobSpec, JobState
from heet_tui.core.sched_input import ClusterView

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller

PREFIX = CANNOT_START


def why_waiting(spec: JobSpec, cluster: ClusterView) -> str | None:
    capacity: dict[str, int] = {}
    for h in cluster.hosts:
        if not h.drained:
            capacity[h.gpu_type] = capacity.get(h.gpu_type, 0) + len(h.free)
    if not capacity:
        return f"{PREFIX}no host is ready (see the Cluster screen, or heet-tui hosts check)"
    allowed = {t: n for t, n in capacity.items() if spec.allows(t)}
    if not allowed:
        ready = ", ".join(f"{n}x{t}" for t, n in sorted(capacity.items()))
        return f"{PREFIX}no ready host has {' or '.join(spec.gpu_types)} GPUs (ready and not drained: {ready})"
    most = max(sorted(allowed), key=lambda t: allowed[t])
    if allowed[most] < spec.min_gpus:
        return (f"{PREFIX}it needs at least {spec.min_gpus} GPUs of one type; the most the ready hosts have is "
                f"{allowed[most]}x{most}")
    return None


def explain_waiting(ctl: Controller, now: float) -> None:
    """Put each queued job's reason in its message, and take it back once it could run."""
    queued = [rec.job for rec in ctl.store.jobs(include_terminal=False)
              if rec.job.state is JobState.QUEUED and rec.job.id not in ctl.executor.runs]
    if not queued:
        return
    cluster = ctl.cluster_view(for_plans=False)  # whether it could ever fit, not whether it fits now
    for job in queued:
        why = why_waiting(job.spec, cluster)
        if why is not None and job.message != why:
            ctl.store.try_set_state(job.id, JobState.QUEUED, now, why)
        elif why is None and job.message.startswith(PREFIX):
            ctl.store.try_set_state(job.id, JobState.QUEUED, now, "waiting for a plan")
