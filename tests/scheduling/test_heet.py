"""Behaviour of the Heet policy: SRPT, heterogeneity, elasticity, restart hysteresis, starvation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_cases import alloc, curve, host, job

from heet_tui.core.plan import ChangeKind
from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling import make_policy
from heet_tui.scheduling.synthetic import advance


def plan(cluster, jobs, name="heet", **params):
    return make_policy(name, **params).plan(cluster, jobs, 0.0)


# Behaviour both Heet variants share (the look-ahead one has its own tests in test_lookahead.py).
both_variants = pytest.mark.parametrize("name", ["heet", "heet-lookahead"])


@both_variants
def test_short_job_first_on_a_single_gpu(name) -> None:
    cluster = ClusterView((host("a", "T4", 1),))
    jobs = [job("long", hi=1, work=1e7), job("short", hi=1, work=1e4)]
    assert set(plan(cluster, jobs, name).allocations) == {"short"}


@both_variants
def test_jobs_go_where_their_comparative_advantage_is(name) -> None:
    # "fast" gains 10x on A100, "flat" only 1.2x: the A100 host should go to "fast".
    cluster = ClusterView((host("a", "A100", 1), host("t", "T4", 1)))
    jobs = [job("flat", hi=1, work=1e5, fn=curve(A100=1.2, T4=1.0)),
            job("fast", hi=1, work=1e5, fn=curve(A100=10.0, T4=1.0))]
    allocs = plan(cluster, jobs, name).allocations
    assert allocs["fast"].gpu_type == "A100" and allocs["flat"].gpu_type == "T4"


@both_variants
def test_a_lone_elastic_job_grows_onto_one_host(name) -> None:
    cluster = ClusterView((host("a", "A100", 8), host("b", "A100", 8)))
    allocs = plan(cluster, [job("j", hi=8, work=1e7, fn=curve(serial=0.01))], name).allocations
    assert allocs["j"].num_gpus == 8 and allocs["j"].placement == (8,)


@both_variants
def test_two_jobs_share_capacity_and_no_gpu_idles(name) -> None:
    cluster = ClusterView((host("a", "RTX", 8),))
    jobs = [job("x", hi=8, work=1e6), job("y", hi=8, work=1.1e6)]
    allocs = plan(cluster, jobs, name).allocations
    assert sum(a.num_gpus for a in allocs.values()) == 8 and set(allocs) == {"x", "y"}


@both_variants
def test_small_gain_does_not_pay_for_a_restart(name) -> None:
    # Running on 4 of 8 GPUs with a costly restart: going to 5 gains little, so it stays.
    cluster = ClusterView((host("a", "RTX", 8, free=(0, 1, 2, 3, 4)),))
    running = job("r", hi=5, work=1e6, fn=curve(serial=0.3), restart_cost_s=600.0,
                  current=alloc("r", "RTX", a=(0, 1, 2, 3)))
    p = plan(cluster, [running], name)
    assert p.allocations["r"] == running.current and p.is_empty


@both_variants
def test_a_large_gain_is_worth_the_restart(name) -> None:
    cluster = ClusterView((host("a", "RTX", 8),))
    running = job("r", hi=8, work=1e8, fn=curve(serial=0.0), restart_cost_s=10.0,
                  current=alloc("r", "RTX", a=(0,)))
    p = plan(cluster, [running], name)
    assert p.allocations["r"].num_gpus == 8
    assert [c.kind for c in p.changes] == [ChangeKind.GROW]


@both_variants
def test_running_job_keeps_its_gpus_when_nothing_changes(name) -> None:
    cluster = ClusterView((host("a", "T4", 4), host("b", "T4", 4)))
    jobs = [job("x", hi=4, work=1e6, current=alloc("x", "T4", b=(0, 1, 2, 3)))]
    p = plan(cluster, jobs, name)
    assert p.allocations["x"].hosts == (("b", (0, 1, 2, 3)),) and p.is_empty


def test_drained_host_is_vacated() -> None:
    cluster = ClusterView((host("a", "T4", 4, drained=True), host("b", "T4", 4)))
    jobs = [job("x", hi=4, work=1e6, current=alloc("x", "T4", a=(0, 1)))]
    p = plan(cluster, jobs)
    assert p.allocations["x"].host_names == ("b",)
    assert p.changes[0].kind in (ChangeKind.MIGRATE, ChangeKind.GROW)


def test_no_starvation_under_constant_load() -> None:
    """One GPU, a 100x longer job, and a new short job every round (overload): ageing lets it in.

    Short jobs take 10 rounds each, so the queue of short jobs grows without bound; with weights
    doubling every ``age_scale_s`` of waiting the long job must overtake them once it is
    log2(100) x age_scale_s older than the oldest waiting short job; served first come first
    served, that gap grows at a tenth of the clock: about 66 x age_scale_s (133 rounds here).
    """
    cluster = ClusterView((host("a", "T4", 1),))
    policy = make_policy("heet", age_scale_s=120.0)
    jobs = [job("long", hi=1, work=60_000.0, fn=curve(T4=1.0), restart_cost_s=0.0)]
    for r in range(300):
        jobs = [j for j in jobs if (j.remaining_samples or 0) > 1.0] + [
            job(f"s{r}", hi=1, work=600.0, fn=curve(T4=1.0), restart_cost_s=0.0, age_s=0.0)]
        p = policy.plan(cluster, jobs, 60.0 * r)
        if "long" in p.allocations:
            assert r > 10  # it did have to wait: short jobs go first
            return
        jobs = advance(jobs, p, 60.0)
    raise AssertionError("the long job never ran in 300 rounds")


def test_priority_wins_over_size() -> None:
    cluster = ClusterView((host("a", "T4", 1),))
    jobs = [job("vip", hi=1, work=1e6, priority=5), job("small", hi=1, work=5e5)]
    assert set(plan(cluster, jobs).allocations) == {"vip"}


def test_large_round_is_split_and_still_valid() -> None:
    hosts = tuple(host(f"h{i}", ("A100", "RTX", "T4")[i % 3], 8, rack=f"r{i // 4}") for i in range(24))
    jobs = [job(f"j{i}", hi=4, work=1e4 * (1 + i % 7)) for i in range(300)]
    p = plan(ClusterView(hosts), jobs, max_matching_columns=16)
    assert sum(a.num_gpus for a in p.allocations.values()) == 192
    again = plan(ClusterView(hosts), [replace(j) for j in jobs], max_matching_columns=16)
    assert again.allocations == p.allocations
