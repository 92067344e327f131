"""evaluate(): predictions for any plan, including one edited by hand."""

from __future__ import annotations

import pytest
from sched_cases import alloc, curve, host, job

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView
from heet_tui.scheduling import evaluate, make_policy

CLUSTER = ClusterView((host("a", "T4", 4), host("b", "T4", 4)))
FN = curve(serial=0.0, cross_host=0.5, T4=10.0)  # 10 samples/s per GPU, half speed across hosts


def test_prediction_of_a_hand_made_plan() -> None:
    running = job("r", hi=4, work=1000.0, fn=FN, restart_cost_s=30.0, current=alloc("r", "T4", a=(0, 1)), age_s=100.0)
    queued = job("q", hi=4, work=400.0, fn=FN, restart_cost_s=5.0, age_s=50.0)
    proposed = {"r": alloc("r", "T4", a=(0, 1, 2, 3)), "q": alloc("q", "T4", b=(0, 1))}
    effect = evaluate(Plan.build({"r": running.current}, proposed), CLUSTER, [running, queued])
    r, q = effect.for_job("r"), effect.for_job("q")
    assert (r.throughput_before, r.throughput_after, r.restart_pause_s) == (20.0, 40.0, 30.0)
    assert r.completion_s == pytest.approx(30.0 + 1000.0 / 40.0)
    # A start is a change too: the launch pause is counted.
    assert (q.throughput_before, q.throughput_after, q.completion_s) == (0.0, 20.0, pytest.approx(5 + 20.0))
    assert effect.avg_jct_s == pytest.approx(((100 + 55) + (50 + 25)) / 2)
    # Before: r at 20/s finishes in 50 s; q starts at once on its minimum (1 of the 6 free GPUs, 10/s).
    assert effect.avg_jct_before_s == pytest.approx(((100 + 50) + (50 + 5 + 40)) / 2)


def test_jobs_left_waiting_queue_for_the_gpus_there_are_in_submission_order() -> None:
    """Each waiting job was assumed to start at once on its best type: seven jobs on two A100s,
    so "without the plan" read 56 s against the plan's 77 s for the same shape of schedule."""
    cluster = ClusterView((host("fast", "A100", 1), host("slow", "T4", 1)))
    fn = curve(serial=0.0, cross_host=0.5, A100=40.0, T4=10.0)
    jobs = [job(name, hi=1, work=400.0, fn=fn, restart_cost_s=0.0, submitted_at=float(n))
            for n, name in enumerate(("c", "b", "a"))]
    effect = evaluate({}, cluster, jobs)
    # c takes the A100 (10 s); b finishes sooner after c on the A100 (20 s) than alone on the T4 (40 s);
    # a then has the T4 free now (40 s) or the A100 after b (30 s)
    assert [effect.for_job(j).completion_s for j in "cba"] == [10.0, 20.0, 30.0]
    # a job holding the T4 it will not finish for 1000 s keeps it
    busy = job("busy", hi=1, work=10_000.0, fn=fn, restart_cost_s=0.0, current=alloc("busy", "T4", slow=(0,)))
    effect = evaluate({"busy": busy.current}, cluster, [*jobs, busy])
    assert [effect.for_job(j).completion_s for j in "cba"] == [10.0, 20.0, 30.0]
    assert effect.avg_jct_before_s == pytest.approx((10 + 20 + 30 + 1000) / 4)


def test_a_jobs_finish_time_scale_corrects_its_training_time_not_its_pause() -> None:
    # A job whose efficiency will rise (the simulator's jobs) trains for less than remaining /
    # throughput says; the restart pause and the throughput shown are not scaled.
    plain = job("j", hi=4, work=1000.0, fn=FN, restart_cost_s=30.0)
    faster = job("j", hi=4, work=1000.0, fn=FN, restart_cost_s=30.0, finish_time_scale=0.25)
    plan = {"j": alloc("j", "T4", a=(0, 1))}
    p, f = evaluate(plan, CLUSTER, [plain]).for_job("j"), evaluate(plan, CLUSTER, [faster]).for_job("j")
    assert p.completion_s == pytest.approx(30.0 + 1000.0 / 20.0)
    assert f.completion_s == pytest.approx(30.0 + 0.25 * 1000.0 / 20.0)
    assert (f.throughput_after, f.restart_pause_s) == (p.throughput_after, p.restart_pause_s)
    # Left waiting, it is predicted on its minimum count with the same correction.
    waiting = evaluate({}, CLUSTER, [faster]).for_job("j")
    assert waiting.completion_s == pytest.approx(30.0 + 0.25 * 1000.0 / 10.0)


def test_goodput_is_shown_as_the_raw_samples_per_second_a_job_reports() -> None:
    # The simulator's throughput functions count useful samples; at efficiency 0.2 the job
    # processes five times as many. Only the shown rate changes, not when the job finishes.
    plain = job("j", hi=4, work=1000.0, fn=FN, current=alloc("j", "T4", a=(0,)))
    goodput = job("j", hi=4, work=1000.0, fn=FN, current=alloc("j", "T4", a=(0,)), statistical_efficiency=0.2)
    plan = {"j": alloc("j", "T4", a=(0, 1))}
    p, g = evaluate(plan, CLUSTER, [plain]).for_job("j"), evaluate(plan, CLUSTER, [goodput]).for_job("j")
    assert (g.throughput_before, g.throughput_after) == (pytest.approx(50.0), pytest.approx(100.0))
    assert (p.throughput_before, p.throughput_after) == (10.0, 20.0)
    assert g.completion_s == p.completion_s


def test_spreading_costs_what_the_throughput_function_says() -> None:
    j = job("j", hi=4, work=1000.0, fn=FN)
    packed = evaluate({"j": alloc("j", "T4", a=(0, 1))}, CLUSTER, [j]).for_job("j")
    spread = evaluate({"j": alloc("j", "T4", a=(0,), b=(0,))}, CLUSTER, [j]).for_job("j")
    assert packed.throughput_after == 2 * spread.throughput_after


def test_a_policy_plan_carries_its_prediction() -> None:
    jobs = [job("x", hi=8, work=1e4, fn=FN), job("y", hi=8, work=1e5, fn=FN)]
    p = make_policy("heet").plan(CLUSTER, jobs, 0.0)
    assert p.effect == evaluate(p, CLUSTER, jobs)
    assert all(pred.throughput_after > 0 for pred in p.effect.jobs)


@pytest.mark.parametrize(("proposed", "message"), [
    ({"ghost": alloc("ghost", "T4", a=(0,))}, "unknown job 'ghost'"),
    ({"j": alloc("j", "T4", z=(0,))}, "unknown host 'z'"),
    ({"j": alloc("j", "A100", a=(0,))}, "wants A100 GPUs but host 'a' has T4"),
    ({"j": alloc("j", "T4", a=(0,)), "k": alloc("k", "T4", a=(0,))}, "GPU 0 of host 'a' is given to two jobs"),
])
def test_inconsistent_edited_plans_are_refused(proposed, message) -> None:
    jobs = [job("j", fn=FN), job("k", fn=FN)]
    with pytest.raises(ValueError, match=message):
        evaluate(proposed, CLUSTER, jobs)
