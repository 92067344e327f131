"""Jobs of one profile class (same ``model`` and ``batch_size``: a sweep's twins) share measurements.

Seen on the bundled local config with twelve copies of small-cnn: every copy was profiled
(24 runs for one measurement), and a plan preempted small-cnn-5, 21 steps in, to start its
twin small-cnn, because the twin's profiling run had happened to measure a higher speed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control import planning
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions, Executor
from heet_tui.control.restart_costs import DEFAULT_RESTART_S, cost_of
from heet_tui.control.runtime import RankProc, Run, rank_agent_id
from heet_tui.control.store import Store
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import ApprovePlan, SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind
from heet_tui.core.sched_input import ClusterView, Constraints, HostView
from heet_tui.scheduling import make_policy


def test_twins_share_their_measurements_and_count_once_when_types_are_compared() -> None:
    book = ThroughputBook()
    for job_id in ("a", "b"):
        book.register(job_id, "cnn", 64)
    book.register("other", "cnn", 128)  # another batch size is another class
    book.register("x", "bert", 32)
    book.add("a", "T4", (1,), 100.0)
    book.add("b", "T4", (1,), 140.0)
    book.add("b", "A100", (1,), 400.0)
    book.add("x", "T4", (1,), 10.0)
    book.add("x", "A100", (1,), 20.0)
    assert book.measured("a") == book.measured("b") == {("T4", "1"): 120.0, ("A100", "1"): 400.0}
    assert book.own("a") == {("T4", "1"): 100.0}
    assert book.measured("other") == {}
    assert book.class_mates("a") == {"b"} and book.class_mates("other") == set()
    book.register("c", "cnn", 64)
    assert book.own("c") == {} and book.estimate("c", "A100", (1,)) == 400.0, "a new twin is measured already"
    # one class measured on both types (however many twins), one other: the ratio is their geometric mean
    assert abs(book.type_ratio("A100", "T4") - ((400 / 120) * 2.0) ** 0.5) < 1e-9


def _wide_beside_small(root: Path, hosts) -> tuple[Store, ThroughputBook]:
    """Job "wide" running on h at 1,100 samples/s beside its twin "small" at 600 (the same
    model key, so twins), reported on an executor whose hosts file is ``hosts``."""
    store = Store(root / "state")
    book = ThroughputBook()
    executor = Executor(None, hosts, store, book, ExecOptions())
    clock = iter(range(0, 10_000, 11))
    executor.clock = lambda: float(next(clock))
    for name in ("small", "wide"):
        store.add_job(JobSpec(name, ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10)), 0.0)
        book.register(name, "cifar10", 64)
    rank = RankProc("h", rank_agent_id("wide", 0, store.store_id), 0, (0,), "running")
    executor.runs["wide"] = Run("wide", Allocation.of("wide", "A100", {"h": [0]}), 3, {0: rank}, 0.0)
    book.add("small", "A100", (1,), 3000.0, "profiling", 0.0)  # measured alone: not what running twins compare on
    for step in range(1, 12):
        book.add("small", "A100", (1,), 600.0, "running", step * 22.0)  # running beside it
        executor.on_progress("h", rank.agent_id, 3, {"step": step, "samples": step * 64, "samples_per_s": 1100.0})
    return store, book


def test_a_job_that_measures_unlike_its_twins_is_told_so_once(tmp_path: Path) -> None:
    """Sharing numbers rests on the spec's model key; a job copied from another spec with the key
    left unchanged would quietly get, and spoil, its twins' numbers."""
    store, book = _wide_beside_small(tmp_path, hosts=None)
    warnings = [e.message for e in store.events(limit=100) if e.kind == "warning"]
    assert warnings == ["wide runs at 1.83x the speed of its twins (model cifar10, batch 64) on 1xA100 on h[0]; "
                        "they share throughput numbers, so if it is another model, give it a model key of its own"]
    book.add("small", "T4", (1,), 100.0, "running", 300.0)
    assert book.unlike_twins("small", "T4", "1", 300.0) is None, "nothing to compare with"
    book.register("calm", "cifar10", 64)
    for t in range(5):
        book.add("calm", "A100", (1,), 700.0, "running", 300.0 + t)
    assert book.unlike_twins("calm", "A100", "1", 305.0) is None, "700 against (600 + 1100) / 2: within 1.5x"
    assert book.unlike_twins("wide", "A100", "1", 240.0) is not None
    assert book.unlike_twins("wide", "A100", "1", 1000.0) is None, "twins that ran apart in time are not compared"


def test_twins_on_emulated_gpus_are_not_compared(tmp_path: Path) -> None:
    """Emulated GPUs share the login node's cores: their speeds say how busy it is, not which model."""
    from control_lab import write_local_hosts

    from heet_tui.config.hosts_file import load_hosts

    store, book = _wide_beside_small(tmp_path, hosts=load_hosts(write_local_hosts(tmp_path, [("h", "A100", 1, 1.0)])))
    assert book.unlike_twins("wide", "A100", "1", 240.0) is not None, "the numbers differ as in the test above"
    assert not [e for e in store.events(limit=100) if e.kind == "warning"]


def test_twins_are_not_compared_with_profiling_runs_measured_under_another_load() -> None:
    """Seen on a sweep of emulated GPUs: five trainings shared the CPU and ran at ~120 samples/s
    while the leader's profiling runs (two at a time) had measured 511; each twin was warned
    at 0.37x that it was "probably another model"."""
    book = ThroughputBook()
    for name in ("lead", "twin"):
        book.register(name, "cifar10", 64)
    book.add("lead", "T4", (1,), 627.0, "profiling", 25.0)
    book.add("lead", "T4", (1,), 395.0, "profiling", 25.5)
    for t in range(5):
        book.add("twin", "T4", (1,), 120.0, "running", 71.0 + 12 * t)
    assert book.unlike_twins("twin", "T4", "1", 120.0) is None
    book.add("lead", "T4", (1,), 118.0, "running", 119.0)  # running now, at the twin's speed
    assert book.unlike_twins("twin", "T4", "1", 120.0) is None


def test_restart_pause_of_a_twin_that_never_ran_is_its_class_median() -> None:
    costs = {"a": 4.0, "b": 6.0, "z": 100.0}
    assert cost_of("a", costs, {"b"}) == 4.0
    assert cost_of("c", costs, {"a", "b"}) == 5.0
    assert cost_of("c", costs, set()) == DEFAULT_RESTART_S and cost_of("c", costs, set(), None) is None


def test_a_running_twin_is_not_preempted_for_one_that_measured_faster_by_chance() -> None:
    book = ThroughputBook()
    for job_id in ("running", "waiting"):
        book.register(job_id, "cnn", 64)
    book.add("running", "T4", (1,), 100.0)  # measured while a profiling run shared the host
    book.add("waiting", "T4", (1,), 130.0)
    cluster = ClusterView((HostView("h", "T4", 1, (0,)),))
    now = 1000.0
    inputs = [
        planning.JobInput("running", JobState.RUNNING, 1, 1, (), 0, 0.0, 80.0, 9_000.0,
                          Allocation.of("running", "T4", {"h": [0]}), Constraints(), restart_cost_s=5.0),
        planning.JobInput("waiting", JobState.QUEUED, 1, 1, (), 0, 10.0, 0.0, 10_000.0, None, Constraints(),
                          restart_cost_s=5.0),
    ]
    for name in ("heet", "srtf"):
        plan = planning.run_policy(make_policy(name), name, cluster, planning.job_views(inputs, book, now), book, now)
        assert set(plan.allocations) == {"running"}, f"{name} preempted the twin with less work left"


def test_a_sweep_is_profiled_through_one_twin_and_planned_whole(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 2, 0.5)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3))
        await ctl.start()
        try:
            for name in ("s1", "s2", "s3"):
                await ctl.post(SubmitJob(str(write_job(tmp_path, name, steps=100000, max_gpus=1, model="sweep"))))
            snap = await wait_for(ctl, lambda s: any(j.state is JobState.PROFILING for j in s.jobs), 60, "profiling")
            (profiling,) = [j for j in snap.jobs if j.state is JobState.PROFILING]
            assert profiling.message.startswith("profiling: short runs on 1xA100 on fast[0] and 1xT4 on slow[") \
                and profiling.message.endswith("; planned once they report the job's speed"), profiling.message
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 90, "a first plan")
            # planned once the leader's round is over (both types measured), all three together
            assert len(snap.plan.allocations) == 3, snap.plan.allocations
            assert {o[1] for o in store.observations() if o[5] == "profiling"} == {"A100", "T4"}
            profiled = {o[0] for o in store.observations() if o[5] == "profiling"}
            assert len(profiled) == 1, f"each class is profiled once, not by {sorted(profiled)}"
            (leader,) = profiled
            events = [e.message for e in store.events(limit=200)]
            assert sum("profiling on" in m for m in events) == 1, events
            twins = sorted({"s1", "s2", "s3"} - {leader})
            # each says the plan that starts it waits for approval (control/waiting.py)
            assert all(job(snap, t).message.startswith(f"in plan #{snap.plan_id} (start on 1x") for t in twins), \
                [job(snap, t).message for t in twins]
            assert all(job(snap, t).restart_s == job(snap, leader).restart_s is not None for t in twins)
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: all(j.state is JobState.RUNNING for j in s.jobs), 60, "all three running")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_twin_measured_long_ago_gives_way_to_the_twins_measuring_now() -> None:
    """A sweep's first job ran alone on an idle host; hours later its twin runs on a busy one.
    The old number is history: counted equal with the new one, the plan expected 5x the speed."""
    book = ThroughputBook()
    for job_id in ("first", "now", "queued"):
        book.register(job_id, "cnn", 64)
    book.add("first", "T4", (1,), 1063.0, "running", 100.0)
    book.add("first", "T4", (2,), 1800.0, "running", 200.0)
    book.add("now", "T4", (1,), 115.0, "running", 7200.0)
    assert book.measured("queued")[("T4", "1")] == 115.0
    # no twin measured 2 GPUs lately: the old number, scaled as the 1-GPU cell changed (1,063 -> 115);
    # left at 1,800 it promised 16x for a resize
    assert abs(book.measured("now")[("T4", "2")] - 1800.0 * 115 / 1063) < 1e-6
    book.add("queued", "T4", (1,), 125.0, "running", 7300.0)
    assert book.measured("first")[("T4", "1")] == 120.0, "twins measuring together are pooled as before"
    book.add("queued", "T4", (2,), 200.0, "running", 7400.0)
    assert book.measured("first")[("T4", "2")] == 200.0, "measured lately: as measured"


def test_the_rigid_policies_ask_for_what_one_gpu_type_here_can_hold() -> None:
    """wide-cnn (1-8 GPUs) under fifo on the local config (2 A100s, 4 T4s) was asked for its
    max_gpus of 8, never started, and the Jobs screen predicted its start "in ~0s"."""
    book = ThroughputBook()
    book.register("wide", "cnn", 64)
    cluster = ClusterView((HostView("a", "A100", 2, (0, 1)), HostView("t", "T4", 4, (0, 1, 2, 3)),
                           HostView("u", "T4", 4, (1, 2)),  # the hosts file lets heet use GPUs 1 and 2 of 4
                           HostView("d", "T4", 8, tuple(range(8)), drained=True)))
    wide = planning.JobInput("wide", JobState.QUEUED, 1, 8, (), 0, 0.0, 0.0, None, None, Constraints(), measured=False)
    a100 = replace(wide, id="a100", gpu_types=("A100",))
    views = planning.job_views([wide, a100], book, 10.0, cluster)
    assert [v.requested_gpus for v in views] == [6, 2], "the most one allowed type holds for heet, drained aside"
    assert [v.requested_gpus for v in planning.job_views([wide], book, 10.0)] == [8], "no cluster: its max"
    for name in ("fifo", "srtf", "gavel"):
        plan = planning.run_policy(make_policy(name), name, cluster, planning.job_views([wide], book, 10.0, cluster),
                                   book, 10.0)
        assert "wide" in plan.allocations, f"{name} never started it"
