"""Placement rules: stay put, fewest hosts, one rack, best fit."""

from __future__ import annotations

from sched_cases import alloc, host, job

from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling.placement import place
from heet_tui.scheduling.problem import Problem


def test_fits_on_one_host_with_best_fit() -> None:
    cluster = ClusterView((host("big", "T4", 8), host("small", "T4", 4)))
    allocs = place(Problem(cluster, [job("j")]), {"j": ("T4", 3)})
    assert allocs["j"].host_names == ("small",)


def test_fewest_hosts_and_one_rack() -> None:
    cluster = ClusterView((host("a1", "T4", 4, rack="A"), host("b1", "T4", 4, rack="B"), host("b2", "T4", 4, rack="B"),
                           host("a2", "T4", 2, rack="A")))
    allocs = place(Problem(cluster, [job("j")]), {"j": ("T4", 8)})
    assert allocs["j"].host_names == ("b1", "b2")


def test_shrink_keeps_the_hosts_where_the_job_has_most() -> None:
    cluster = ClusterView((host("a", "T4", 4), host("b", "T4", 4)))
    running = job("j", current=alloc("j", "T4", a=(0, 1, 2), b=(3,)))
    allocs = place(Problem(cluster, [running]), {"j": ("T4", 3)})
    assert allocs["j"].hosts == (("a", (0, 1, 2)),)


def test_grow_stays_on_current_host_first() -> None:
    cluster = ClusterView((host("a", "T4", 4), host("b", "T4", 8)))
    running = job("j", current=alloc("j", "T4", a=(2,)))
    allocs = place(Problem(cluster, [running]), {"j": ("T4", 4)})
    assert allocs["j"].hosts == (("a", (0, 1, 2, 3)),)


def test_big_jobs_placed_first_keep_whole_hosts() -> None:
    cluster = ClusterView((host("a", "T4", 4), host("b", "T4", 4)))
    jobs = [job("s1"), job("s2"), job("big")]
    allocs = place(Problem(cluster, jobs), {"s1": ("T4", 2), "s2": ("T4", 2), "big": ("T4", 4)}, ["s1", "s2", "big"])
    assert allocs["big"].placement == (4,)
    assert allocs["s1"].host_names == allocs["s2"].host_names


def test_busy_gpus_are_never_used() -> None:
    cluster = ClusterView((host("a", "T4", 4, free=(1, 3)),))
    allocs = place(Problem(cluster, [job("j")]), {"j": ("T4", 2)})
    assert allocs["j"].hosts == (("a", (1, 3)),)
