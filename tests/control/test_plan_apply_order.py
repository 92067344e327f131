"""A plan's steps free GPUs before they are claimed (control/plan_apply.py).

Seen in the SSH lab: a plan moved big-wide onto the two T4s a sweep job held while that job
moved to an A100. big-wide's step came first (by kind, then name): it stopped big-wide, found
the T4s in use, failed, and big-wide, stopped, was back in the queue.
"""

from __future__ import annotations

from pathlib import Path

from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import load_job_spec
from heet_tui.control.controller import Controller
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobState
from heet_tui.core.plan import Plan


def _on(job_id: str, *gpus: int) -> Allocation:
    return Allocation.of(job_id, "T4", {"h": list(gpus)})


async def _apply(ctl: Controller, store: Store, allocations: dict[str, Allocation]) -> int:
    """Approve a hand-made plan and wait until the controller has applied it."""
    current = {j: r.alloc for j, r in ctl.executor.runs.items()}
    plan_id = store.add_plan(Plan.build(current, allocations, "hand", ctl.clock()))
    store.set_plan_status(plan_id, "approved", ctl.clock())
    await wait_for(ctl, lambda s: store.plan(plan_id).status in ("applied", "failed"), 90, f"plan #{plan_id} applied")
    return plan_id


def _scenario(tmp_path: Path, jobs: tuple[str, ...], start: dict[str, tuple[int, ...]],
              then: dict[str, tuple[int, ...]], check, gpus: int = 3) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", gpus, 1.0)]))
    store = Store(tmp_path / "state")
    for name in jobs:
        store.add_job(load_job_spec(write_job(tmp_path, name, steps=100_000, max_gpus=2)), 0.0)

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await _apply(ctl, store, {j: _on(j, *g) for j, g in start.items()})
            await wait_for(ctl, lambda s: all(job(s, j).state is JobState.RUNNING for j in start), 60, "running")
            before = {j: store.job(j).generation for j in jobs}
            plan_id = await _apply(ctl, store, {j: _on(j, *g) for j, g in then.items()})
            await check(ctl, store, plan_id, before)

    run_and_clean(scenario, tmp_path)


def test_a_job_moving_onto_gpus_another_job_leaves_waits_for_it(tmp_path: Path) -> None:
    async def check(ctl, store, plan_id, before) -> None:
        assert [s.status for s in store.steps(plan_id)] == ["done", "done"], store.steps(plan_id)
        assert ctl.executor.runs["a"].alloc == _on("a", 1) and ctl.executor.runs["b"].alloc == _on("b", 2)
        launches = [e.message for e in store.events(limit=100) if e.kind == "launch"]
        assert launches[-2].startswith("b generation") and launches[-1].startswith("a generation"), launches

    _scenario(tmp_path, ("a", "b"), {"a": (0,), "b": (1,)}, {"a": (1,), "b": (2,)}, check)


def test_two_jobs_that_swap_gpus_are_both_moved(tmp_path: Path) -> None:
    async def check(ctl, store, plan_id, before) -> None:
        assert [s.status for s in store.steps(plan_id)] == ["done", "done"], store.steps(plan_id)
        assert ctl.executor.runs["a"].alloc == _on("a", 1) and ctl.executor.runs["b"].alloc == _on("b", 0)

    _scenario(tmp_path, ("a", "b"), {"a": (0,), "b": (1,)}, {"a": (1,), "b": (0,)}, check)


def test_a_ring_is_broken_at_a_job_in_it_not_at_one_waiting_on_it(tmp_path: Path) -> None:
    """b and c wait on each other (b takes GPU 3 from c, c takes GPU 1 from b); a, first by
    name, waits on b for GPU 2. Stopping a would free nothing anyone needs."""
    async def check(ctl, store, plan_id, before) -> None:
        assert [s.status for s in store.steps(plan_id)] == ["done", "done", "done"], store.steps(plan_id)
        assert {j: ctl.executor.runs[j].alloc for j in "abc"} == {"a": _on("a", 2), "b": _on("b", 3, 4),
                                                                    "c": _on("c", 1)}

    _scenario(tmp_path, ("a", "b", "c"), {"a": (0,), "b": (1, 2), "c": (3,)},
              {"a": (2,), "b": (3, 4), "c": (1,)}, check, gpus=5)


def test_a_step_onto_gpus_a_job_outside_the_plan_holds_fails_without_stopping_its_job(tmp_path: Path) -> None:
    """b keeps GPU 1 (no step of its own), so a's move there cannot happen: a runs on where it is."""
    async def check(ctl, store, plan_id, before) -> None:
        (step,) = store.steps(plan_id)
        assert step.status == "failed" and step.message == "GPUs [1] of h are still in use", step
        await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 10, "a still running")
        assert store.job("a").generation == before["a"], "a was not stopped"
        assert ctl.executor.runs["a"].alloc == _on("a", 0)

    _scenario(tmp_path, ("a", "b"), {"a": (0,), "b": (1,)}, {"a": (1,), "b": (1,)}, check)


def test_steps_in_nobodys_way_run_side_by_side(tmp_path: Path) -> None:
    """At scale a plan of 36 stops and 85 launches ran one step at a time (a stop a second, 45 s),
    with the freed GPUs idle and nothing else planned meanwhile."""
    async def check(ctl, store, plan_id, before) -> None:
        assert [s.status for s in store.steps(plan_id)] == ["done", "done", "done"], store.steps(plan_id)
        times = store._db.execute("SELECT started_at, finished_at FROM plan_steps WHERE plan_id = ?",
                                  (plan_id,)).fetchall()
        assert max(started for started, _ in times) < min(finished for _, finished in times), \
            f"every step began before the first ended: {times}"

    _scenario(tmp_path, ("a", "b", "c"), {"a": (0,), "b": (1,), "c": (2,)}, {"a": (3,), "b": (4,), "c": (5,)},
              check, gpus=6)


def test_a_job_stopped_where_the_stop_cannot_reach_says_its_run_goes_on_there(tmp_path: Path) -> None:
    """A run on a hung host was stopped for its checkpoint elsewhere; the stop never reached it,
    the job started a second copy, and its message said only "waiting for approval"."""
    from dataclasses import replace

    from heet_tui.core.host import HostState

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=100_000, max_gpus=1)), 0.0)

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await _apply(ctl, store, {"a": _on("a", 0)})
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "running")
            real = ctl.executor.cluster.status
            ctl.executor.cluster.status = lambda: [replace(s, state=HostState.UNREACHABLE) for s in real()]
            await ctl.executor.stop_run(ctl.executor.runs["a"], "preempt")
            await wait_for(ctl, lambda s: store.job("a").job.state is JobState.QUEUED, 30, "a queued")
            ctl.executor.cluster.status = real

    run_and_clean(scenario, tmp_path)
    message = store.job("a").job.message
    assert message.startswith("preempt; its run on h (out of reach) is stopped when the host is back; resumes "
                              "from its checkpoint"), message


def test_a_step_onto_a_host_drained_after_the_plan_was_made_is_not_taken(tmp_path: Path) -> None:
    """A plan approved a moment before `hosts drain b` launched its job on b a second after the
    drain; the next plan moved it off again (a stop and a start for nothing)."""
    from heet_tui.control.drains import set_drained

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=100_000, max_gpus=1)), 0.0)

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            set_drained(store, "h", True, "maintenance")
            plan_id = await _apply(ctl, store, {"a": _on("a", 0)})
            (step,) = store.steps(plan_id)
            assert step.status == "failed" and "host h was drained after the plan was made" in step.message, step
            assert "a" not in ctl.executor.runs and store.job("a").job.state is JobState.QUEUED
            assert not [e for e in store.events("a") if e.kind == "launch"]

    run_and_clean(scenario, tmp_path)


def test_a_move_whose_new_host_is_drained_while_the_job_stops_does_not_launch_there(tmp_path: Path) -> None:
    """The check above came before the stop: a slow save, the drain meanwhile, and the job was
    launched on the drained host all the same."""
    from heet_tui.control.drains import set_drained

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 1, 1.0), ("g", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")
    store.add_job(load_job_spec(write_job(tmp_path, "a", steps=100_000, max_gpus=1)), 0.0)

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await _apply(ctl, store, {"a": _on("a", 0)})
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running on h")
            stop = ctl.executor.stop_run

            async def drain_g_meanwhile(run, reason, **kwargs):
                set_drained(store, "g", True, "maintenance")  # as `hosts drain g` during a slow save
                return await stop(run, reason, **kwargs)

            ctl.executor.stop_run = drain_g_meanwhile
            plan_id = await _apply(ctl, store, {"a": Allocation.of("a", "T4", {"g": [0]})})
            (step,) = store.steps(plan_id)
            assert step.status == "failed" and "host g was drained while a stopped" in step.message, step
            assert "a" not in ctl.executor.runs and store.job("a").job.state is JobState.QUEUED
            assert [e.message for e in store.events("a") if e.kind == "launch"][-1].endswith("on h[0]")

    run_and_clean(scenario, tmp_path)
