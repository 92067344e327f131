"""Whether a submitted job can ever run on the simulated cluster, and if not, why: said at once
as a per-job "unschedulable" outcome instead of after hours of simulated waiting."""

from __future__ import annotations

from collections.abc import Mapping

from heet_tui.scheduling.baselines import rigid_gpus
from heet_tui.sim.state import SimJob


def packed(count: int, host_size: int) -> tuple[int, ...]:
    full, rest = divmod(count, host_size)
    return (host_size,) * full + ((rest,) if rest else ())


def never_runs(job: SimJob, type_capacity: Mapping[str, int], host_size: Mapping[str, int]) -> str:
    """Why the job can never run here, or "" when it can: at some count of one type, not
    only at its smallest (a pipeline-parallel GPT profiled on 4 or more GPUs was
    "unschedulable" as a 1-GPU job, on a cluster of 16 A100s it runs on)."""
    k = job.min_gpus
    for t, cap in type_capacity.items():
        top = min(cap, job.max_gpus, job.physics.max_gpus(t))
        if any(job.progress_rate(t, packed(n, host_size[t])) > 0 for n in range(k, top + 1)):
            return ""
    types = ", ".join(f"{t} ({c} GPUs)" for t, c in sorted(type_capacity.items()))
    # "none" read as "not profiled at all" of gpt_pmp on a cluster of T4s only: profiled elsewhere
    profiled = (", ".join(f"{t} up to {job.physics.max_gpus(t)}" for t in job.physics.gpu_types())
                or "on none of the cluster's GPU types")
    if any(cap >= k and job.physics.max_gpus(t) >= k for t, cap in type_capacity.items()):
        # GPUs and profiles are there: the batch is what no profiled configuration can run
        return (f"batch size {job.spec.batch_size} runs on no profiled configuration of {job.spec.application!r} "
                f"from {k} GPU(s) up (its validation runs go up to a global batch of "
                f"{job.physics.validation.max_batch_size:g}); cluster has {types}; profiled: {profiled}")
    return (f"needs at least {k} GPU{'s' if k != 1 else ''} of one type with a profile for {job.spec.application!r}; "
            f"cluster has {types}; profiled: {profiled}")


def never_given(job: SimJob, policy: object, type_capacity: Mapping[str, int], host_size: Mapping[str, int]) -> str:
    """Why a policy that gives each job exactly its requested count (``gives_rigid_count``), or
    at most it (``caps_rigid_count``: rigid-fifo, which goes down to the largest count the job
    runs at), can never place ``job``, or "": no GPU type holds that many, or the model runs at
    none of those counts. Said at submission, not after 240 idle rounds (at 900 s rounds,
    simulated days after it): a pipeline-parallel gpt_pmp asking for 1 GPU waited so under fifo,
    gavel and rigid-fifo, though it runs on 2 or more."""
    exact = getattr(policy, "gives_rigid_count", False)
    if not exact and not getattr(policy, "caps_rigid_count", False):
        return ""
    want = rigid_gpus(job.min_gpus, job.max_gpus, job.spec.num_replicas)
    name = getattr(policy, "name", "?")
    # of the types its model was profiled on, as far as profiled: a T4 count beside no T4 profile
    # let a 12-GPU job wait 60 simulated hours on a cluster whose profiled type held 8
    most = max((min(cap, job.physics.max_gpus(t)) for t, cap in type_capacity.items()), default=0)
    if exact and want > most:
        return (f"policy {name!r} gives each job exactly the {want} GPUs it asks for "
                f"(num_replicas), and the most GPUs of one type that the cluster holds and its model's profiles "
                f"reach is {most}")
    counts = [want] if exact else list(range(max(job.min_gpus, 1), want + 1))
    if any(job.progress_rate(t, packed(n, host_size[t])) > 0
           for t, cap in type_capacity.items() for n in counts if n <= cap):
        return ""
    asked = f"exactly the {want} GPU{'s' if want != 1 else ''}" if exact else f"at most the {want} GPU{'s' if want != 1 else ''}"
    return (f"policy {name!r} gives each job {asked} it asks for (num_replicas), and "
            f"{job.spec.application!r} at batch size {job.spec.batch_size} runs on no profiled configuration of "
            f"{'that many' if exact else 'so few'} GPUs on this cluster (an elastic policy may run it on more)")
