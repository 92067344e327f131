"""Spread placements: priced when faster than packing, realised by placement, packed otherwise.

The throughput family mimics what the Sia profiles measured for yolov3 on the A100 hosts: two
GPUs on one host barely beat one (1.2x), one GPU on each of two hosts runs 1.7x.
"""

from __future__ import annotations

import pytest
from sched_cases import alloc, host, job

from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling.placement import place
from heet_tui.scheduling.problem import Problem, spread_placements
from heet_tui.scheduling.registry import make_policy

SPEED = {(1,): 1.0, (2,): 1.2, (1, 1): 1.7, (3,): 1.5, (2, 1): 1.6, (4,): 2.0, (2, 2): 1.8, (3, 1): 1.7}


def yolo_like(gpu_type: str, placement: tuple[int, ...]) -> float:
    return 100.0 * SPEED.get(placement, 0.0)


def _two_hosts(**kw) -> ClusterView:
    return ClusterView((host("a", "A100", 8, **kw), host("b", "A100", 8, **kw)))


def test_spread_placements_are_two_host_splits_and_the_most_even_over_more_hosts() -> None:
    assert spread_placements(2, 8, 2) == [(1, 1)]
    assert spread_placements(4, 8, 2) == [(3, 1), (2, 2)]
    assert spread_placements(6, 4, 6) == [(4, 2), (3, 3), (2, 2, 2), (2, 2, 1, 1)]
    assert spread_placements(20, 8, 4) == [(7, 7, 6), (5, 5, 5, 5)]  # no two hosts of 8 hold 20
    assert spread_placements(2, 8, 1) == [] and spread_placements(1, 8, 4) == []


def test_shapes_price_a_count_at_its_fastest_placement_and_name_it() -> None:
    spread, packed = (Problem(_two_hosts(), [job("y", fn=yolo_like)], shapes=s) for s in (True, False))
    info_s, info_p = spread.by_id["y"], packed.by_id["y"]
    assert spread.throughput(info_s, "A100", 2) == pytest.approx(170.0)
    assert spread.shape(info_s, "A100", 2) == (1, 1)
    assert spread.shape(info_s, "A100", 4) == (4,)  # packing is fastest for four
    assert packed.throughput(info_p, "A100", 2) == pytest.approx(120.0)
    assert packed.shape(info_p, "A100", 2) == (2,)


def test_a_new_job_gets_its_priced_shape_on_two_hosts() -> None:
    problem = Problem(_two_hosts(), [job("y", fn=yolo_like)], shapes=True)
    allocs = place(problem, {"y": ("A100", 2)})
    assert allocs["y"].placement == (1, 1) and allocs["y"].host_names == ("a", "b")


def test_without_room_for_the_shape_the_job_is_packed() -> None:
    cluster = ClusterView((host("a", "A100", 8), host("b", "A100", 8, free=())))
    allocs = place(Problem(cluster, [job("y", fn=yolo_like)], shapes=True), {"y": ("A100", 2)})
    assert allocs["y"].placement == (2,) and allocs["y"].host_names == ("a",)


def test_the_shape_stays_in_one_rack_when_it_can() -> None:
    cluster = ClusterView((host("a", "A100", 8, rack="r1"), host("b", "A100", 4, rack="r2"),
                           host("c", "A100", 8, rack="r2")))
    allocs = place(Problem(cluster, [job("y", fn=yolo_like)], shapes=True), {"y": ("A100", 2)})
    assert allocs["y"].host_names == ("b", "c")  # r2 holds both parts; best fit inside it


def test_spread_jobs_are_placed_before_packed_ones_so_whole_hosts_do_not_block_them() -> None:
    flat = job("big", hi=16, fn=lambda t, p: 10.0 * sum(p))  # indifferent to placement: packed
    problem = Problem(_two_hosts(), [flat, job("y", fn=yolo_like)], shapes=True)
    allocs = place(problem, {"big": ("A100", 14), "y": ("A100", 2)}, order=["big", "y"])
    assert allocs["y"].placement == (1, 1)
    assert allocs["big"].placement == (7, 7)


@pytest.mark.parametrize("work, moves", [(1e7, True), (1e3, False)])
def test_a_kept_job_on_a_slow_shape_moves_only_when_the_time_saved_pays_restarts(work: float, moves: bool) -> None:
    running = job("y", work=work, fn=yolo_like, restart_cost_s=60.0, current=alloc("y", "A100", a=(0, 1)))
    allocs = place(Problem(_two_hosts(), [running], shapes=True), {"y": ("A100", 2)})
    assert (allocs["y"].placement == (1, 1)) is moves
    if not moves:
        assert allocs["y"].hosts == (("a", (0, 1)),)


@pytest.mark.parametrize("policy", ["heet", "heet-lookahead"])
def test_policies_run_a_job_on_the_spread_placement_it_is_fastest_on(policy: str) -> None:
    jobs = [job("y", lo=2, hi=2, fn=yolo_like)]
    plan = make_policy(policy).plan(_two_hosts(), jobs, now=0.0)
    assert plan.allocations["y"].placement == (1, 1)
    packed = make_policy(policy, shapes=False).plan(_two_hosts(), jobs, now=0.0)
    assert packed.allocations["y"].placement == (2,)


def test_a_growing_job_whose_shape_cannot_be_formed_keeps_its_gpus_and_grows_in_place() -> None:
    cluster = ClusterView((host("a", "A100", 8), host("b", "A100", 8, free=())))
    running = job("y", fn=yolo_like, current=alloc("y", "A100", a=(3,)))
    allocs = place(Problem(cluster, [running], shapes=True), {"y": ("A100", 2)})
    assert allocs["y"].host_names == ("a",) and 3 in dict(allocs["y"].hosts)["a"] and allocs["y"].num_gpus == 2
