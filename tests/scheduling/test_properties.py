"""Invariants every policy must keep, over random clusters and jobs (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from sched_cases import rounds

from heet_tui.core.plan import diff
from heet_tui.scheduling import make_policy

POLICIES = ["heet", "heet-lookahead", "fifo", "srtf", "gavel", "goodput-mip"]


def check_invariants(cluster, jobs, plan) -> None:
    by_id = {j.id: j for j in jobs}
    hosts = {h.name: h for h in cluster.hosts}
    held = {(h, g) for j in jobs if j.current for h, ix in j.current.hosts for g in ix}
    used: set[tuple[str, int]] = set()
    for job_id, a in plan.allocations.items():
        job = by_id[job_id]
        c = job.constraints
        assert not c.held, f"{job_id} is held but scheduled"
        lo, hi = (c.fixed_count, c.fixed_count) if c.fixed_count else (job.min_gpus, job.max_gpus)
        assert lo <= a.num_gpus <= hi, f"{job_id}: {a.num_gpus} GPUs outside [{lo}, {hi}]"
        assert job.allows(a.gpu_type), f"{job_id}: type {a.gpu_type} not allowed"
        for h, ix in a.hosts:
            assert hosts[h].gpu_type == a.gpu_type
            assert not hosts[h].drained, f"{job_id} placed on drained host {h}"
            if c.pinned_hosts:
                assert h in c.pinned_hosts
            for g in ix:
                assert (h, g) not in used, f"GPU {h}:{g} given twice"
                assert g in hosts[h].free or (h, g) in held, f"GPU {h}:{g} is neither free nor heet's"
                used.add((h, g))
    current = {j.id: j.current for j in jobs if j.current and j.current.num_gpus}
    assert plan.changes == diff(current, plan.allocations)


@pytest.mark.parametrize("name", POLICIES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rounds())
def test_plans_respect_capacity_and_constraints(name, case) -> None:
    cluster, jobs = case
    plan = make_policy(name).plan(cluster, jobs, 0.0)
    check_invariants(cluster, jobs, plan)
    assert plan.policy == name


@settings(max_examples=60, deadline=None)
@given(case=rounds())
def test_heet_is_deterministic(case) -> None:
    cluster, jobs = case
    a = make_policy("heet").plan(cluster, jobs, 5.0)
    b = make_policy("heet").plan(cluster, list(jobs), 5.0)
    assert a.allocations == b.allocations and a.changes == b.changes
