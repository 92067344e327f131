"""What a running simulation looks like to the UI: core ``JobStatus``/``HostStatus``/``Snapshot``.

The demo backend renders a simulation exactly as it renders a real cluster, so the UI needs
nothing simulator-specific; these builders are the only translation.
"""

from __future__ import annotations

from heet_tui.core.gpu import Gpu
from heet_tui.core.host import HostState
from heet_tui.core.snapshot import HostStatus, JobStatus, Snapshot
from heet_tui.sim.engine import Simulation


def _planned_eta(sim: Simulation, job_id: str) -> float | None:
    """A waiting job's completion under the pending plan that starts it, as the Plan screen says
    it (the Jobs screen's ETA was blank beside the plan's "Done in 2m10s")."""
    plan = sim.pending_plan
    pred = plan.effect.for_job(job_id) if plan is not None and job_id in plan.allocations else None
    return pred.completion_s if pred is not None else None


def job_statuses(sim: Simulation) -> tuple[JobStatus, ...]:
    out = []
    for job in sim.jobs.values():
        alloc = job.allocation
        raw = 0.0
        if alloc is not None and job.rate > 0:
            raw = job.physics.throughput(alloc.gpu_type, alloc.placement, job.spec.batch_size) / job.slowdown
        message = job.message
        if alloc is not None and job.restart_left > 0:
            message = f"restarting ({job.restart_left:.0f} s of checkpoint-restore left)"
        out.append(JobStatus(
            id=job.id, name=job.id, state=job.state, model=job.spec.application, allocation=alloc,
            progress=job.fraction_done, throughput=raw,
            eta_s=sim.eta_s(job) if alloc is not None else _planned_eta(sim, job.id), restarts=job.restarts,
            submitted_at=job.spec.time, min_gpus=job.min_gpus, max_gpus=job.max_gpus, message=message,
            events=tuple(job.events[-20:]), ended_at=job.finished_at, edit=job.constraints, gpu_types=job.gpu_types,
        ))
    return tuple(out)


def host_statuses(sim: Simulation) -> tuple[HostStatus, ...]:
    holders: dict[str, list[tuple[int, str]]] = {}
    for job in sim.jobs.values():
        if job.allocation is None:
            continue
        for host, gpus in job.allocation.hosts:
            holders.setdefault(host, []).extend((g, job.id) for g in gpus)
    out = []
    for node in sim.cluster.nodes:
        gpus = tuple(Gpu(i, node.gpu_type, source="emulated") for i in range(node.gpus))
        out.append(HostStatus(
            name=node.name, state=HostState.READY, message=f"simulated {node.node_type} node",
            gpus=gpus, rack=node.node_type, gpu_source="simulated", last_seen=sim.now,
            gpu_jobs=tuple(sorted(holders.get(node.name, ()))),
        ))
    return tuple(out)


def snapshot(sim: Simulation, plan_id: int | None = None, policy: str = "", auto_approve: bool | None = None,
             notices: tuple[str, ...] = ()) -> Snapshot:
    """The whole simulated cluster as one immutable snapshot (the pending plan if any, else the last)."""
    plan = sim.pending_plan if sim.pending_plan is not None else sim.last_plan
    return Snapshot(
        now=sim.now, hosts=host_statuses(sim), jobs=job_statuses(sim), plan=plan, plan_id=plan_id,
        policy=policy or getattr(sim.policy, "name", ""),
        auto_approve=(not sim.manual_approval) if auto_approve is None else auto_approve,
        mode="demo", notices=notices,
    )
