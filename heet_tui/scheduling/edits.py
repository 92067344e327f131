"""User edits to a plan: fix a job's type, count or hosts, or hold it, then plan again.

An edit is a ``Constraints`` on one job. Re-planning with the constraint in the input (rather
than patching the plan) lets the policy move other jobs out of the way, and every policy
already guarantees it respects constraints, so the result is always a consistent plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, Constraints, JobView
from heet_tui.scheduling.registry import Policy


def apply_constraints(jobs: Sequence[JobView], job_id: str, constraints: Constraints) -> list[JobView]:
    """``jobs`` with ``job_id``'s constraints replaced; ValueError for an unknown job."""
    out, found = [], False
    for job in jobs:
        if job.id == job_id:
            job = replace(job, constraints=constraints)
            found = True
        out.append(job)
    if not found:
        raise ValueError(f"edit: no job {job_id!r} in this round")
    return out


def replan_with_edit(policy: Policy, cluster: ClusterView, jobs: Sequence[JobView], now: float,
                     job_id: str, constraints: Constraints) -> Plan:
    """The policy's plan after ``job_id`` gets ``constraints`` (checked like any input)."""
    return policy.plan(cluster, apply_constraints(jobs, job_id, constraints), now)
