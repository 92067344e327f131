"""Invariants every policy must keep, over random clusters and jobs (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from sched_cases import rounds

from heet_tui.core.plan import diff
from heet_tui.core.sched_input import ClusterView
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


def _without_two(gpu_type: str, placement: tuple[int, ...]) -> float:
    """A job that cannot run on 2 GPUs (it crashed there): throughput 0, as for a type it cannot use."""
    return 0.0 if sum(placement) == 2 else 100.0 * sum(placement) ** 0.9


@pytest.mark.parametrize("name", [*POLICIES, "rigid-fifo"])
def test_no_policy_gives_a_job_a_size_it_has_no_throughput_at(name) -> None:
    """The controller prices a size a job crashed at as 0; heet's slot of 2 GPUs gave it that size
    three times over (each a crash) while 1 GPU worked."""
    from sched_cases import host, job

    cluster = ClusterView((host("h", "A100", 2),))
    plan = make_policy(name).plan(cluster, [job("c", 1, 2, fn=_without_two)], 0.0)
    assert plan.allocations["c"].num_gpus == 1, plan.allocations
    bigger = ClusterView((host("h", "A100", 4),))  # and it still grows past the size it cannot use
    plan = make_policy(name).plan(bigger, [job("c", 1, 4, fn=_without_two)], 0.0)
    assert plan.allocations["c"].num_gpus != 2, plan.allocations
