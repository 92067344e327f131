"""A queued job that no ready host can hold says why, and stops saying so when one can."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.control.waiting import PlanMade, free_after, plan_reason, why_waiting
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import ApprovePlan, CancelJob, SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind
from heet_tui.core.plan import JobPrediction, Plan, PredictedEffect
from heet_tui.core.sched_input import ClusterView, HostView


def _spec(lo: int = 1, types: tuple[str, ...] = ()) -> JobSpec:
    return JobSpec("j", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10), min_gpus=lo, max_gpus=8,
                   gpu_types=types)


def test_the_reason_names_what_is_missing_and_what_there_is() -> None:
    cluster = ClusterView((HostView("a", "A100", 2, (0, 1)), HostView("t", "T4", 4, (0, 1, 2, 3)),
                           HostView("d", "T4", 4, (0, 1, 2, 3), drained=True)))
    assert why_waiting(_spec(), cluster) is None
    assert why_waiting(_spec(types=("H100", "H200")), cluster) == (
        "cannot start yet: no ready host has H100 or H200 GPUs (ready and not drained: 2xA100, 4xT4)")
    assert why_waiting(_spec(lo=5), cluster) == (
        "cannot start yet: it needs at least 5 GPUs of one type; the most the ready hosts have is 4xT4")
    assert why_waiting(_spec(lo=3, types=("A100",)), cluster).endswith("is 2xA100")
    assert why_waiting(_spec(), ClusterView(())) == (
        "cannot start yet: no ready host has a usable GPU (see the Cluster screen, or heet-tui hosts check)")
    assert "no ready host has a usable GPU" in why_waiting(_spec(types=("T4",)), ClusterView(()))


def test_a_job_too_big_for_the_cluster_says_so_until_a_host_joins(tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "big", steps=10, max_gpus=3)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))

    async def scenario() -> None:
        ctl = Controller(load_hosts(path), store, ControllerOptions(interval_s=0.2))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "big").message.startswith("cannot start yet"), 60,
                                  "the reason")
            assert job(snap, "big").message.endswith("the most the ready hosts have is 1xT4")
            await asyncio.sleep(1.0)  # five rounds: profiling it would take the GPU for a job that cannot run
            assert not [e for e in store.events() if e.kind == "profile"] and store.job("big").generation == 0
            write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 2, 1.0)])  # the file gains a host
            await wait_for(ctl, lambda s: not job(s, "big").message.startswith("cannot start yet"), 60,
                           "the reason gone once a host joined")
            # once it fits, it is planned (a 2-GPU job is not profiled on one GPU: profiling_rounds.py)
            await wait_for(ctl, lambda s: s.plan is not None and "big" in s.plan.allocations, 60, "a plan once it fits")
            assert not [e for e in store.events() if e.kind == "profile"]
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


# -- a job the latest plan leaves waiting ---------------------------------------------------------

WEIGHED = frozenset({"r", "j"})

def _plan_leaving_j_waiting(starts_on: str | None) -> Plan:
    """``r`` keeps one A100; ``j`` is left waiting, predicted to start on ``starts_on`` in 40 s."""
    running = Allocation.of("r", "A100", {"a": [0]})
    effect = PredictedEffect((JobPrediction("r", 100.0, 100.0, 40.0, 0.0),
                              JobPrediction("j", 0.0, 0.0, 90.0, 0.0, 40.0 if starts_on else None, starts_on)))
    return Plan.build({"r": running}, {"r": running}, "heet", 0.0, effect)


def test_a_job_left_waiting_says_for_what() -> None:
    cluster = ClusterView((HostView("a", "A100", 1, (0,)), HostView("t", "T4", 4, (0, 1, 2, 3))))
    plan = _plan_leaving_j_waiting("A100")
    made = PlanMade.of(plan, WEIGHED)
    free = free_after(plan, cluster, kept={})
    assert free == {"A100": 0, "T4": 4}
    assert plan_reason("j", _spec(), made, None, False, free, held=False) == (
        "held for faster GPUs: the plan waits for A100 GPUs, predicted to free soon enough to finish it sooner "
        "than a start now on the free T4 GPUs")
    # four T4s free and it needs five: "every GPU it may use is taken" beside them
    assert plan_reason("j", _spec(lo=5), made, None, False, free, held=False) == (
        "waiting for GPUs: it needs 5 GPUs of one type, and only 4xT4 are free; it should start on A100 as running "
        "jobs end")
    assert plan_reason("j", _spec(types=("A100",)), made, None, False, free, held=False) == (
        "waiting for GPUs: every A100 GPU it may use is taken; it should start on A100 as running jobs end")
    assert plan_reason("j", _spec(), made, None, False, free, held=True) == (
        "left queued: held by hand (e on the Plan screen changes it)")
    undecided = _plan_leaving_j_waiting(None)  # no start foreseen, GPUs free: the policy's choice
    assert plan_reason("j", _spec(), PlanMade.of(undecided, WEIGHED), None, False, free, held=False) == (
        "left queued: the heet plan gives the free 4xT4 GPUs to no job; it is planned again as jobs come and go")
    # rejected, the plan that left it waiting frees nothing and takes nothing: "every GPU it may use
    # is taken" was said on an idle cluster
    assert plan_reason("j", _spec(lo=5), made, None, True, free, held=False) == (
        "left queued: the latest plan was rejected; nothing is proposed until something changes (p on the Plan "
        "screen, or heet-tui plan again, plans now)")
    # GPUs a run outside the plan keeps are not free
    assert free_after(plan, cluster, kept={"t": {0, 1, 2, 3}})["T4"] == 0


def test_a_job_a_plan_starts_says_whether_it_waits_for_approval() -> None:
    start = Allocation.of("j", "T4", {"t": [0, 1]})
    made = PlanMade.of(Plan.build({}, {"j": start}, "heet", 0.0), WEIGHED)
    free: Counter[str] = Counter()
    assert plan_reason("j", _spec(), made, 7, False, free, held=False) == (
        "in plan #7 (start on 2xT4), waiting for approval: a on the Plan screen, or heet-tui plan approve")
    assert plan_reason("j", _spec(), made, None, False, free, held=False) is None, "approved: being started"
    assert plan_reason("j", _spec(), made, 7, False, free, held=False, read_only=True) == (
        "in plan #7 (start on 2xT4); this controller only watches (--read-only): one started without it applies "
        "plans"), "not advice that a watch-only controller refuses"
    assert plan_reason("j", _spec(), made, None, True, free, held=False) == (
        "left queued: a plan that starts it was rejected; nothing is proposed until something changes (p on the "
        "Plan screen, or heet-tui plan again, plans now)")


def test_a_queued_job_says_it_waits_for_approval_then_for_gpus(tmp_path: Path) -> None:
    """Manual mode, one GPU, a long job and its short twin (measured together): the plan
    starts the short one, which waits for approval; the long one waits for the GPU, with the
    start the plan predicts for it; once the GPU frees, it is in the next plan."""
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    long = write_job(tmp_path, "long", steps=5000, max_gpus=1, model="m")
    short = write_job(tmp_path, "short", steps=2000, max_gpus=1, model="m")

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store, interval_s=0.2, profile=True) as ctl:
            await ctl.post(SubmitJob(str(long)))
            await ctl.post(SubmitJob(str(short)))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and
                                  job(s, "short").message.startswith(f"in plan #{s.plan_id} "), 90,
                                  "a plan that starts the short job, waiting for approval")
            assert "long" not in snap.plan.allocations
            assert job(snap, "short").message == (f"in plan #{snap.plan_id} (start on 1xT4), waiting for approval: "
                                                  "a on the Plan screen, or heet-tui plan approve")
            # its ETA under the plan, as the Plan screen has it (the Jobs screen's was blank)
            planned = snap.plan.effect.for_job("short").completion_s
            assert job(snap, "short").eta_s is not None and job(snap, "short").eta_s <= planned
            assert store.job("long").job.message == (  # the GPU is idle: the plan awaiting approval gives it to short
                f"waiting for GPUs: every GPU it may use is taken (plan #{snap.plan_id}, awaiting approval, starts "
                "short on them); it should start on T4 as running jobs end")
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: job(s, "short").state is JobState.RUNNING, 60, "the short job running")
            snap = await wait_for(ctl, lambda s: "predicted start on T4 in ~" in job(s, "long").message, 30,
                                  "the long job's predicted start")
            assert job(snap, "long").eta_s is not None, "a predicted completion too"
            assert "predicted start" not in store.job("long").job.message, "no countdown in the store"
            await ctl.post(CancelJob("short"))
            await wait_for(ctl, lambda s: job(s, "long").message.startswith("in plan #"), 60,
                           "the long job in the next plan once the GPU frees")

    run_and_clean(scenario, tmp_path)


def test_a_pending_plan_shows_a_job_that_arrived_after_it_under_the_same_id(tmp_path: Path) -> None:
    """The same moves planned again keep the pending plan (its id is what an approval names),
    but its predictions are remade: a job submitted after it and left waiting had no wait row
    and counted in none of its averages, while the job's own message spoke of the plan."""
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    store = Store(tmp_path / "state")
    first, later = write_job(tmp_path, "first", steps=5000, max_gpus=1), write_job(tmp_path, "later", steps=50,
                                                                                   max_gpus=1)

    async def scenario() -> None:
        async with manual_controller(load_hosts(path), store, interval_s=0.2) as ctl:
            await ctl.post(SubmitJob(str(first)))
            snap = await wait_for(ctl, lambda s: s.plan is not None and "first" in s.plan.allocations, 60,
                                  "a plan that starts the first job")
            plan_id, created = snap.plan_id, snap.plan.created_at
            assert {p.job_id for p in snap.plan.effect.jobs} == {"first"}
            await ctl.post(SubmitJob(str(later)))
            snap = await wait_for(ctl, lambda s: s.plan is not None and "later" in {p.job_id for p in s.plan.effect.jobs},
                                  60, "the pending plan to predict the later job's wait")
            assert (snap.plan_id, snap.plan.created_at) == (plan_id, created), "the same plan, proposed when it was"
            assert "later" not in snap.plan.allocations and store.plan(plan_id).status == "proposed"

    run_and_clean(scenario, tmp_path)


def test_gpus_the_pending_plan_gives_others_are_said_to_be_theirs() -> None:
    """With nothing running, a job read "every A100 GPU it may use is taken": the pending plan,
    not yet approved, gave the idle A100s to two other jobs, and nothing said so."""
    cluster = ClusterView((HostView("a", "A100", 2, (0, 1)),))
    small, wide = Allocation.of("small", "A100", {"a": [0]}), Allocation.of("wide", "A100", {"a": [1]})
    plan = Plan.build({}, {"small": small, "wide": wide}, "heet", 0.0)
    made = PlanMade.of(plan, frozenset({"small", "wide", "pair"}))
    free = free_after(plan, cluster, kept={})
    assert plan_reason("pair", _spec(types=("A100",)), made, 6, False, free, held=False) == (
        "waiting for GPUs: every A100 GPU it may use is taken (plan #6, awaiting approval, starts small, wide on them)")
    one = Plan.build({}, {"small": small}, "heet", 0.0)
    assert plan_reason("pair", _spec(lo=2, types=("A100",)), PlanMade.of(one, made.weighed), None, False,
                       free_after(one, cluster, kept={}), held=False) == (
        "waiting for GPUs: it needs 2 GPUs of one type, and only 1xA100 is free"), "is, for one"


def test_a_crashed_job_waiting_out_its_retry_pause_is_said_to_be_retried(tmp_path: Path) -> None:
    """It read "waiting with nothing proposed (left out by the policy, or in a plan you rejected
    ...); p plans again", with nothing rejected and nothing p could change."""
    from heet_tui.control.execution import ExecOptions
    from heet_tui.core.waiting import why_waiting as why_plan_waits

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    spec = write_job(tmp_path, "bad", steps=10, max_gpus=1,
                     command=["python3", "-c", "import sys; print('boom'); sys.exit(7)"])

    async def scenario() -> None:
        options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False,
                                    execution=ExecOptions(retry_backoff_s=120.0))
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: "retry 1/2 in 120 s" in job(s, "bad").message, 60, "bad's retry pause")
            said = why_plan_waits(snap)
            assert "bad: crashed, and retried after a pause (the Jobs screen says why)." in said, said
            assert "nothing proposed" not in said, said
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_job_waiting_beside_a_drained_host_of_its_type_says_so(tmp_path: Path) -> None:
    """"every GPU it may use is taken" was said beside the idle GPU of a drained host."""
    from control_lab import started_controller

    from heet_tui.control.drains import set_drained

    store = Store(tmp_path / "state")
    set_drained(store, "spare", True)
    hosts = load_hosts(write_local_hosts(tmp_path, [("busy", "T4", 1, 1.0), ("spare", "T4", 1, 1.0)]))

    async def scenario() -> None:
        options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=100, max_gpus=1, model="a"))))
            snap = await wait_for(ctl, lambda s: job(s, "b").message.startswith("waiting for GPUs"), 60, "b waiting")
            assert "; drained, so not used: spare" in job(snap, "b").message, job(snap, "b").message

    run_and_clean(scenario, tmp_path)
