"""User edits: re-planning with a pinned type, fixed count, pinned hosts or a hold."""

from __future__ import annotations

import pytest
from sched_cases import alloc, host, job

from heet_tui.core.sched_input import ClusterView, Constraints
from heet_tui.scheduling import apply_constraints, make_policy, replan_with_edit

CLUSTER = ClusterView((host("a", "A100", 8, rack="r1"), host("t1", "T4", 4), host("t2", "T4", 4)))
JOBS = [job("x", hi=8, work=1e6, current=alloc("x", "A100", a=tuple(range(8)))), job("y", hi=4, work=2e6)]


@pytest.mark.parametrize("name", ["heet", "heet-lookahead", "goodput-mip", "srtf"])
def test_each_edit_is_respected(name) -> None:
    policy = make_policy(name)
    p = replan_with_edit(policy, CLUSTER, JOBS, 0.0, "x", Constraints(pinned_type="T4"))
    assert p.allocations["x"].gpu_type == "T4"
    p = replan_with_edit(policy, CLUSTER, JOBS, 0.0, "x", Constraints(fixed_count=3))
    assert p.allocations["x"].num_gpus == 3
    p = replan_with_edit(policy, CLUSTER, JOBS, 0.0, "x", Constraints(pinned_hosts=("t2",)))
    assert p.allocations["x"].host_names == ("t2",)
    p = replan_with_edit(policy, CLUSTER, JOBS, 0.0, "x", Constraints(held=True))
    assert "x" not in p.allocations and any(c.job_id == "x" and c.kind.value == "stop" for c in p.changes)


def test_edit_of_unknown_job_is_refused() -> None:
    with pytest.raises(ValueError, match="no job 'zz'"):
        apply_constraints(JOBS, "zz", Constraints(held=True))


def test_impossible_edit_leaves_the_job_waiting() -> None:
    p = replan_with_edit(make_policy("heet"), CLUSTER, JOBS, 0.0, "y", Constraints(pinned_type="T4", fixed_count=6,
                                                                                    pinned_hosts=("t1",)))
    assert "y" not in p.allocations


@pytest.mark.parametrize("name", ["heet", "heet-lookahead", "goodput-mip", "srtf"])
def test_an_edit_narrows_the_types_a_spec_allows_and_never_widens_them(name) -> None:
    """Seen: a job whose spec says gpu_types = ["T4"] was tweaked onto an A100, and ran there."""
    t4_only = [JOBS[0], job("y", hi=4, work=2e6, gpu_types=("T4",))]
    with pytest.raises(ValueError, match=r"job 'y': pinned GPU type 'A100' is not one its spec allows \(gpu_types: T4\)"):
        replan_with_edit(make_policy(name), CLUSTER, t4_only, 0.0, "y", Constraints(pinned_type="A100"))
    p = replan_with_edit(make_policy(name), CLUSTER, t4_only, 0.0, "y", Constraints(fixed_count=2))
    assert p.allocations["y"].gpu_type == "T4"
    # pinned to the A100 host alone: planned nowhere, and the job read "given no GPUs by the policy"
    with pytest.raises(ValueError, match=r"job 'y': pinned hosts a \(A100\) have no GPU type it may use \(T4\)"):
        replan_with_edit(make_policy(name), CLUSTER, t4_only, 0.0, "y", Constraints(pinned_hosts=("a",)))
    p = replan_with_edit(make_policy(name), CLUSTER, t4_only, 0.0, "y", Constraints(pinned_hosts=("a", "t2")))
    assert p.allocations["y"].host_names == ("t2",)
