"""Bad input gets a clear ValueError naming the job/host; the registry explains missing policies."""

from __future__ import annotations

import math

import pytest
from sched_cases import alloc, host, job

from heet_tui.core.sched_input import ClusterView, Constraints, HostView
from heet_tui.scheduling import make_policy

CLUSTER = ClusterView((host("a", "T4", 4), host("b", "A100", 8)))


@pytest.mark.parametrize("name", ["heet", "heet-lookahead", "fifo", "srtf", "gavel", "goodput-mip"])
@pytest.mark.parametrize(("bad", "message"), [
    (job("x", lo=-1), "min_gpus must be >= 1"),
    (job("x", lo=4, hi=2), "max_gpus 2 < min_gpus 4"),
    (job("x", constraints=Constraints(fixed_count=-2)), "fixed GPU count must be >= 1"),
    (job("x", constraints=Constraints(pinned_type="H100")), "pinned GPU type 'H100' is not in the cluster"),
    (job("x", constraints=Constraints(pinned_hosts=("nope",))), "pinned hosts ['nope']"),
    (job("x", fn=lambda t, p: math.nan), "throughput"),
    (job("x", fn=lambda t, p: -1.0), "must be a finite number >= 0"),
    (job("x", work=-5.0), "remaining_samples must be >= 0"),
    (job("x", finish_time_scale=0.0), "finish_time_scale must be finite and > 0"),
    (job("x", finish_time_scale=math.inf), "finish_time_scale must be finite and > 0"),
    (job("x", statistical_efficiency=-1.0), "statistical_efficiency must be finite and > 0"),
    (job("x", fn=lambda t, p: {}["missing"]), "failed or is not a number: KeyError"),
])
def test_bad_job_input_is_refused(name, bad, message) -> None:
    with pytest.raises(ValueError, match="job 'x'") as info:
        make_policy(name).plan(CLUSTER, [bad], 0.0)
    assert message in str(info.value)


def test_bad_cluster_input_is_refused() -> None:
    with pytest.raises(ValueError, match="host 'a': free GPU indices \\[7\\]"):
        make_policy("heet").plan(ClusterView((HostView("a", "T4", 4, (0, 7)),)), [], 0.0)
    with pytest.raises(ValueError, match="host 'a': negative GPU count"):
        make_policy("heet").plan(ClusterView((HostView("a", "T4", -1, ()),)), [], 0.0)
    with pytest.raises(ValueError, match="duplicate host name"):
        make_policy("heet").plan(ClusterView((host("a", "T4", 1), host("a", "T4", 1))), [], 0.0)


def test_duplicate_job_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="job 'x': duplicate job id"):
        make_policy("heet").plan(CLUSTER, [job("x"), job("x")], 0.0)


def test_unknown_policy_and_parameters() -> None:
    with pytest.raises(ValueError, match="unknown policy 'best'.*heet"):
        make_policy("best")
    with pytest.raises(ValueError, match="bad parameters"):
        make_policy("heet", colour=3)
    with pytest.raises(ValueError, match="horizon_s must be > 0"):
        make_policy("heet", horizon_s=0)


def test_rigid_fifo_is_lazy() -> None:
    """Asking for rigid-fifo either works (the simulator's file exists) or says what is missing."""
    try:
        policy = make_policy("rigid-fifo")
    except ValueError as exc:
        assert "heet_tui.scheduling.rigid_fifo" in str(exc)
    else:
        assert hasattr(policy, "plan")


def test_empty_inputs_give_an_empty_plan() -> None:
    for name in ["heet", "heet-lookahead", "fifo", "srtf", "gavel", "goodput-mip"]:
        assert make_policy(name).plan(ClusterView(()), [], 0.0).is_empty
        p = make_policy(name).plan(CLUSTER, [job("x", current=alloc("x", "T4", a=(0,)),
                                                 constraints=Constraints(held=True))], 0.0)
        assert p.allocations == {} and [c.kind.value for c in p.changes] == ["stop"]


@pytest.mark.parametrize("name", ["heet", "heet-lookahead", "fifo", "srtf", "gavel", "goodput-mip"])
def test_no_policy_starts_a_job_on_a_type_it_cannot_run_on(name) -> None:
    """Throughput 0 means "cannot run there" (a type nothing measured the job on, a size it
    crashed at). Seen: heet and fifo gave such a job the only free GPU, a broken T4 host's its
    class was kept off, rather than leave it waiting for the busy A100."""
    only_t4 = ClusterView((host("broken", "T4", 1),))
    a100_only = job("a", fn=lambda t, p: 500.0 * sum(p) if t == "A100" else 0.0)
    assert dict(make_policy(name).plan(only_t4, [a100_only], 0.0).allocations) == {}
    not_at_one = job("b", hi=2, fn=lambda t, p: 900.0 if sum(p) == 2 else 0.0)
    plan = make_policy(name).plan(ClusterView((host("t", "T4", 2),)), [not_at_one], 0.0)
    assert plan.allocations.get("b") is None or plan.allocations["b"].num_gpus == 2, "never at the size it cannot run"


def test_rigid_fifo_sizes_a_huge_request_by_the_gpus_there_are() -> None:
    """num_replicas 100,000 (a typo) was counted down one count at a time, each a throughput
    lookup: minutes of one round, on a 64-GPU cluster."""
    from heet_tui.core.sched_input import JobView

    asked: list[int] = []

    def throughput(gpu_type: str, placement: tuple[int, ...]) -> float:
        asked.append(sum(placement))
        return 100.0 * sum(placement) if sum(placement) <= 4 else 0.0

    cluster = ClusterView((HostView("a", "T4", 8, tuple(range(8))), HostView("b", "T4", 8, tuple(range(8)))))
    huge = JobView("huge", 1, 100_000, throughput, requested_gpus=100_000)
    plan = make_policy("rigid-fifo").plan(cluster, [huge], 0.0)
    assert plan.allocations["huge"].num_gpus == 4, "the most it runs at, as counted down one by one"
    assert len(asked) <= 60, f"{len(asked)} throughput lookups"


def test_the_search_for_the_largest_count_a_job_runs_at_finds_what_counting_down_finds() -> None:
    """Counts a model runs at are one range (smallest to largest profiled); the search must find
    its top wherever the range sits, however narrow, in far fewer lookups than counting down."""
    import random

    from heet_tui.scheduling.rigid_fifo import _largest_running

    rng = random.Random(1)
    for trial in range(5000):
        low = rng.randint(1, 3)
        high = rng.randint(low, 100_000 if trial % 2 else 300)
        start = rng.randint(low, low + 5)
        top = start + rng.choice([0, 1, 5, 50, 5000])
        asked: list[int] = []

        def runs(k: int, start: int = start, top: int = top, asked: list[int] = asked) -> bool:
            asked.append(k)
            return start <= k <= top

        counted_down = next((k for k in range(high, low - 1, -1) if start <= k <= top), 0) if high < 10_000 \
            else (min(top, high) if start <= high else 0)
        assert _largest_running(runs, low, high) == counted_down, (low, high, start, top)
        assert len(asked) <= 110, f"{len(asked)} lookups"  # 2 x 17 strides and halvings, and a scan of 64
