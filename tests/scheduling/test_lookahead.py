"""heet-lookahead: the time-indexed LP's pieces by hand, and the policy's behaviour."""

from __future__ import annotations

import pytest
from sched_cases import alloc, curve, host, job

from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling import lookahead, make_policy
from heet_tui.scheduling.lookahead import LookaheadParams, slot_edges, solve_first_slot, thin, upper_hull
from heet_tui.scheduling.lookahead_policy import pop_groups, round_first_slot
from heet_tui.scheduling.problem import Problem


def plan(cluster, jobs, **params):
    return make_policy("heet-lookahead", **params).plan(cluster, jobs, 0.0)


def test_upper_hull_keeps_the_concave_frontier_only() -> None:
    # (3, 1.6) lies under the chord from (2, 1.5) to (4, 2.4); (5, 2.3) is slower than 4 GPUs.
    points = [(1, 1.0), (2, 1.5), (3, 1.6), (4, 2.4), (5, 2.3)]
    assert upper_hull(points) == [(1, 1.0), (2, 1.5), (4, 2.4)]
    assert upper_hull([(2, 1.0), (1, 0.9)]) == [(1, 0.9), (2, 1.0)]
    assert upper_hull([]) == []


def test_thin_spreads_the_points_and_keeps_the_largest() -> None:
    points = [(k, float(k)) for k in range(1, 11)]
    picked = thin(points, 4)
    assert len(picked) == 4 and picked[-1] == (10, 10.0) and picked[0] == (1, 1.0)
    assert thin(points[:3], 4) == points[:3]


def test_slots_are_fine_first_then_grow() -> None:
    edges = slot_edges(50_000.0)
    assert edges[:4] == [0.0, 60.0, 180.0, 360.0]
    assert edges[-1] >= 50_000.0 and edges[-2] < 50_000.0
    lengths = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    assert lengths[8] == pytest.approx(1.5 * lengths[7])


def test_a_job_about_to_finish_is_not_preempted_for_a_newcomer() -> None:
    # "ending" needs ~20 s more on its 4 GPUs: the LP runs it for a third of the first minute
    # and gives the rest to "new"; rounding must read that as "ending wants the whole slot".
    cluster = ClusterView((host("a", "A100", 4),))
    ending = job("ending", hi=4, work=200.0, current=alloc("ending", "A100", a=(0, 1, 2, 3)))
    p = plan(cluster, [ending, job("new", hi=4, work=1e6)])
    assert p.allocations == {"ending": ending.current}


def test_a_job_that_finishes_this_minute_stays_where_it_finishes_first() -> None:
    # Every share inside one slot costs the slot's midpoint, so the LP may split a finishing
    # job's last seconds over its fast current GPUs and idle slow ones in any proportion.
    # Rounding must not read the larger share as "move": 2 T4s would take minutes plus a restart.
    cluster = ClusterView((host("a", "A100", 4), host("t", "T4", 4)))
    # curve(): one A100 does 3 samples/s; 4 A100s do ~10: 100 samples is ~10 s of work.
    ending = job("ending", hi=4, work=100.0, restart_cost_s=50.0, current=alloc("ending", "A100", a=(0, 1, 2, 3)))
    problem = Problem(cluster, [ending])
    degenerate = {"ending": {("T4", 2): 0.69, ("A100", 4): 0.31}}
    params = LookaheadParams()
    assert round_first_slot(problem, degenerate, dict(problem.capacity), params) == {"ending": ("A100", 4)}
    # Even when the LP left its current configuration out entirely.
    assert round_first_slot(problem, {"ending": {("T4", 2): 1.0}}, dict(problem.capacity), params) == {
        "ending": ("A100", 4)}
    # A job with hours left follows the LP's split: there the shares are a real trade-off.
    long = job("long", hi=4, work=1e6, restart_cost_s=50.0, current=alloc("long", "A100", a=(0, 1, 2, 3)))
    problem = Problem(cluster, [long])
    assert round_first_slot(problem, {"long": {("T4", 2): 0.69, ("A100", 4): 0.31}}, dict(problem.capacity),
                            params) == {"long": ("T4", 2)}


def test_first_slot_shares_respect_capacity() -> None:
    cluster = ClusterView((host("a", "A100", 4), host("t", "T4", 4)))
    jobs = [job(f"j{i}", hi=4, work=1e4 * (i + 1)) for i in range(5)]
    problem = Problem(cluster, jobs)
    first = solve_first_slot(problem, problem.infos, problem.capacity, LookaheadParams())
    assert first is not None and set(first) == {j.id for j in jobs}
    for gpu_type, cap in problem.capacity.items():
        used = sum(k * v for shares in first.values() for (t, k), v in shares.items() if t == gpu_type)
        assert used <= cap + 1e-6
    assert all(sum(shares.values()) <= 1 + 1e-6 for shares in first.values())


def test_pop_groups_split_jobs_and_every_type() -> None:
    cluster = ClusterView((host("a", "A100", 8), host("t", "T4", 4), host("u", "T4", 3)))
    problem = Problem(cluster, [job(f"j{i}", hi=4) for i in range(10)])
    groups = pop_groups(problem, problem.infos, 4)
    assert len(groups) == 3
    assert sorted(i.id for infos, _ in groups for i in infos) == sorted(j.id for j in problem.infos)
    for gpu_type, cap in problem.capacity.items():
        assert sum(capacity[gpu_type] for _, capacity in groups) == cap


def test_split_rounds_still_use_every_gpu() -> None:
    cluster = ClusterView((host("a", "A100", 8), host("t", "T4", 4)))
    jobs = [job(f"j{i}", hi=4, work=1e5 * (i + 1)) for i in range(10)]
    p = plan(cluster, jobs, max_jobs_per_lp=3)
    assert sum(a.num_gpus for a in p.allocations.values()) == 12


def test_a_failed_solve_falls_back_to_heet(monkeypatch) -> None:
    class Failed:
        x = None

    monkeypatch.setattr(lookahead, "linprog", lambda *a, **k: Failed())
    policy = make_policy("heet-lookahead")
    cluster = ClusterView((host("a", "T4", 4),))
    p = policy.plan(cluster, [job("x", hi=4)], 0.0)
    assert policy.fallbacks == 1 and p.policy == "heet" and p.allocations["x"].num_gpus == 4


def test_same_input_same_plan() -> None:
    cluster = ClusterView((host("a", "A100", 8), host("t", "T4", 4), host("r", "RTX", 8)))
    jobs = [job(f"j{i}", hi=8, work=1e4 * (i + 1) ** 2, fn=curve(scale=1 + i / 10)) for i in range(8)]
    assert plan(cluster, jobs).allocations == plan(cluster, list(jobs)).allocations


@pytest.mark.parametrize("bad", [{"keep": 2.0}, {"horizon_s": 0}, {"max_configs_per_type": 1}, {"min_share": 0}])
def test_bad_parameters_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="lookahead"):
        make_policy("heet-lookahead", **bad)
