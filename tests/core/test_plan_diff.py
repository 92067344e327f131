"""Plan diffs: every change kind, stops before starts, placement keys."""

from __future__ import annotations

from heet_tui.core.allocation import Allocation, placement_key
from heet_tui.core.plan import ChangeKind, Plan, classify, diff


def alloc(job: str, gpu_type: str, **hosts: list[int]) -> Allocation:
    return Allocation.of(job, gpu_type, hosts)


def test_change_kinds() -> None:
    a = alloc("j", "T4", h1=[0, 1])
    assert classify(None, a) is ChangeKind.START
    assert classify(a, None) is ChangeKind.STOP
    assert classify(a, alloc("j", "T4", h1=[1, 0])) is None
    assert classify(a, alloc("j", "T4", h1=[0, 1, 2])) is ChangeKind.GROW
    assert classify(a, alloc("j", "T4", h1=[0])) is ChangeKind.SHRINK
    assert classify(a, alloc("j", "T4", h2=[0, 1])) is ChangeKind.MIGRATE
    assert classify(a, alloc("j", "A100", h1=[0, 1])) is ChangeKind.MIGRATE
    assert classify(a, alloc("j", "A100", h3=[0, 1, 2, 3])) is ChangeKind.MIGRATE


def test_diff_orders_releases_before_claims() -> None:
    current = {"a": alloc("a", "T4", h1=[0, 1]), "b": alloc("b", "T4", h1=[2, 3]), "c": alloc("c", "A100", h2=[0])}
    proposed = {"a": alloc("a", "T4", h1=[0]), "c": alloc("c", "A100", h2=[0, 1]), "d": alloc("d", "T4", h1=[1, 2, 3])}
    kinds = [(c.job_id, c.kind) for c in diff(current, proposed)]
    assert kinds == [("b", ChangeKind.STOP), ("a", ChangeKind.SHRINK), ("c", ChangeKind.GROW), ("d", ChangeKind.START)]


def test_plan_build_drops_empty_allocations() -> None:
    plan = Plan.build({}, {"a": Allocation.of("a", "T4", {}), "b": alloc("b", "T4", h1=[0])})
    assert set(plan.allocations) == {"b"} and len(plan.changes) == 1 and not plan.is_empty


def test_allocation_placement_and_keys() -> None:
    a = alloc("j", "T4", h2=[3], h1=[1, 0])
    assert a.placement == (2, 1) and a.num_gpus == 3 and a.host_names == ("h1", "h2")
    assert a.gpus_on("h1") == (0, 1) and a.describe() == "3xT4 on h1[0,1],h2[3]"
    assert placement_key((2, 4)) == "42" and placement_key((12, 4)) == "12-4"


def test_the_jct_comparison_says_what_without_it_means_and_when_it_is_the_same() -> None:
    """Plan #4 read "53s with this plan, 53s without it": as if approving gained nothing, when
    queueing in order would have started the one waiting job on the same GPUs anyway."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    waiting = (JobPrediction("a", 0.0, 100.0, 53.0, 0.0),)
    same = PredictedEffect(waiting, avg_jct_s=53.0, avg_jct_before_s=53.1)
    assert same.against() == (" with this plan, as without it: queueing for GPUs in order would start the waiting "
                              "jobs the same way")
    better = PredictedEffect(waiting, avg_jct_s=53.0, avg_jct_before_s=309.0)
    assert better.against() == " with this plan, 5m09s without it (waiting jobs then queue for GPUs in order)"
    running = (JobPrediction("a", 50.0, 100.0, 53.0, 0.0),)
    assert PredictedEffect(running, avg_jct_s=53.0, avg_jct_before_s=90.0).against() == " with this plan, " \
        "1m30s without it"
    assert PredictedEffect(running, avg_jct_s=53.0).against() == ""
    # a plan the average says is worse was shown as if it were an improvement
    worse = PredictedEffect(running, avg_jct_s=645.0, avg_jct_before_s=264.0).against()
    assert worse.startswith(" with this plan, 4m24s without it: worse by this average, which weighs every job alike")


def test_a_job_the_plan_delays_much_is_named_beside_an_average_that_hides_it() -> None:
    """An average of 3h36m, ruled by a 33-hour job, read "as without it" while the plan shrank a
    job 2m20s from its end from 8 A100s to one (58k/s to 11k/s): it finished 13 minutes later."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    shrunk = JobPrediction("cifar10-4", 58_000.0, 11_000.0, 797.0, 60.0)  # 2m20s of work at 58k/s
    long = JobPrediction("imagenet-1", 900.0, 900.0, 120_000.0, 0.0)
    effect = PredictedEffect((shrunk, long), avg_jct_s=12_960.0, avg_jct_before_s=12_940.0)
    assert effect.against().startswith(" with this plan, as without it")
    assert effect.delay_said() == "it delays cifar10-4 by 10m57s: done in 13m17s, not 2m20s"
    assert PredictedEffect((shrunk, long)).delay_said() == effect.delay_said(), "said without an average too"
    slight = JobPrediction("cifar10-4", 58_000.0, 50_000.0, 163.0, 0.0)  # a few seconds: not worth a word
    assert PredictedEffect((slight, long), avg_jct_s=12_960.0, avg_jct_before_s=12_940.0).delay_said() == ""


def test_a_job_the_plan_stops_is_said_to_be_out_of_its_average() -> None:
    """Seen: "1m48s with this plan, 1m44s without it: worse by this average", where "with" counted
    one job and "without" two: the held one has no completion under the plan."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    jobs = (JobPrediction("wide-c", 50.0, 50.0, 108.0, 0.0), JobPrediction("cnn-d", 80.0, 0.0, None, 0.0))
    said = PredictedEffect(jobs, avg_jct_s=108.0, avg_jct_before_s=104.0).against()
    assert said == (" with this plan, without cnn-d (stopped by it: no completion to count); 1m44s without the "
                    "plan, counting it"), said
    assert "worse" not in said


def test_a_waiting_job_no_queue_starts_is_said_to_be_in_neither_average() -> None:
    """With t4only held, the plan read "1m40s with this plan, as without it: queueing for GPUs in
    order would start the waiting jobs the same way": both averages had left the held job out."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    jobs = (JobPrediction("a", 0.0, 100.0, 100.0, 0.0), JobPrediction("t4only", 0.0, 0.0, None, 0.0))
    said = PredictedEffect(jobs, avg_jct_s=100.0, avg_jct_before_s=100.0).against()
    assert said == (" with this plan, as without it: queueing for GPUs in order would start the waiting jobs the "
                    "same way; neither counts t4only (held, or no start foreseen)"), said
    queued_later = (jobs[0], JobPrediction("t4only", 0.0, 0.0, 300.0, 0.0, starts_in_s=200.0, starts_on="T4"))
    assert "neither" not in PredictedEffect(queued_later, avg_jct_s=100.0, avg_jct_before_s=100.0).against()


def test_a_plan_that_stops_a_job_for_another_is_not_said_to_do_what_queueing_would() -> None:
    """A stop of bob's job for ann's urgent one read "as without it: queueing for GPUs in order would
    start the waiting jobs the same way": queueing would not have stopped bob's job."""
    from heet_tui.core.plan import JobPrediction, PredictedEffect

    swap = (JobPrediction("bob", 100.0, 0.0, 300.0, 20.0, starts_in_s=120.0),
            JobPrediction("ann", 0.0, 100.0, 120.0, 20.0))
    said = PredictedEffect(swap, avg_jct_s=200.0, avg_jct_before_s=200.5).against()
    assert said == (" with this plan, as without it by this average, which weighs every job alike: the jobs it "
                    "starts gain what it costs bob, stopped until GPUs free again"), said
    assert "queueing" not in said
