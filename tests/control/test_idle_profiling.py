"""A job measured on one GPU type only is measured on another when that type's GPUs sit idle.

Seen with the local transport: job b (gpu_types A100) held both A100s, so job a was profiled
on T4 alone and ran on 4 slow T4s. No job had run on both types, so a had no estimate for
A100 at all; once b ended, the A100s stayed idle and no plan ever moved a there.
"""

from __future__ import annotations

from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import ApprovePlan, CancelJob, SubmitJob
from heet_tui.core.job import JobState


def test_idle_gpus_of_a_type_a_job_has_no_estimate_for_get_it_measured_there(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 2, 1.0), ("slow", "T4", 4, 0.25)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=100000, max_gpus=2,
                                                   extra='gpu_types = ["A100"]\n'))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan for b")
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: job(s, "b").state is JobState.RUNNING, 60, "b running")
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100000, max_gpus=3))))
            await ctl.post(SubmitJob(str(write_job(tmp_path, "twin", steps=100000, max_gpus=1, model="a"))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and {"a", "twin"} <= set(s.plan.allocations),
                                  60, "a plan for a and its twin")
            assert snap.plan.allocations["a"].gpu_type == "T4", "the A100s are b's"
            assert ctl.book.estimate("a", "A100", (1,)) == 0.0, "the case this test is about: no estimate"
            await ctl.post(ApprovePlan(snap.plan_id))
            await wait_for(ctl, lambda s: {job(s, n).state for n in ("a", "twin")} == {JobState.RUNNING}, 60,
                           "a and its twin running")

            await ctl.post(CancelJob("b"))
            await wait_for(ctl, lambda s: "a" in ctl.executor.profiles, 60, "a measured on an idle A100")
            for _ in range(3):  # the other A100 is idle too, but one run measures the class
                await ctl.round()
                assert "twin" not in ctl.executor.profiles, "the twin profiled beside a"
            # Meanwhile a runs on and is planned as usual: left out, its T4s looked free to plans.
            assert "a" in {j.id for j in ctl.job_inputs()}
            snap = await wait_for(ctl, lambda s: s.plan_id is not None and "a" in s.plan.allocations
                                  and s.plan.allocations["a"].gpu_type == "A100", 90, "a plan moving a to A100")
            assert job(snap, "a").state is JobState.RUNNING, "measured beside its run, which went on"
            measured = [o for o in store.observations("a") if o[1] == "A100"]
            assert measured and all(o[5] == "profiling" for o in measured)
            assert any("idle GPUs it had no estimate for" in e.message for e in store.events(job_id="a", limit=50))
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_profiling_takes_only_gpus_the_hosts_file_lets_heet_use(tmp_path: Path) -> None:
    """Before, profiling picked the lowest free index, GPU 0 here, which `gpus` keeps for people."""
    from heet_tui.control.profiling_rounds import idle_gpu_per_type

    path = write_local_hosts(tmp_path, [("only", "T4", 3, 1.0)])
    path.write_text(path.read_text() + "gpus = [1, 2]\n")
    ctl = Controller(load_hosts(path), Store(tmp_path / "state"), ControllerOptions(interval_s=0.3, profile=False))

    async def scenario() -> None:
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: all(h.state.value == "ready" for h in s.hosts), 30, "the host ready")
            assert idle_gpu_per_type(ctl, {}) == {"T4": ("only", 1)}
            assert idle_gpu_per_type(ctl, {"only": {1}}) == {"T4": ("only", 2)}
            assert idle_gpu_per_type(ctl, {}, keep_free={"only": {1, 2}}) == {}
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_new_job_with_no_idle_gpu_to_be_profiled_on_says_so(tmp_path: Path) -> None:
    """It waited with an empty message, and the Plan screen blamed the policy or a rejected plan."""
    from heet_tui.core.job import PROFILE_WAITING

    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100000, max_gpus=1))))
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running on the one GPU")
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=100000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: job(s, "b").message.startswith(PROFILE_WAITING), 30, "b says why")
            assert job(snap, "b").message == PROFILE_WAITING + ("no T4 GPU is idle (in use by jobs, or by processes "
                                                                "heet did not start)")
            await ctl.post(CancelJob("a"))
            await wait_for(ctl, lambda s: job(s, "b").state in (JobState.PROFILING, JobState.RUNNING), 60,
                           "b profiled once the GPU is idle")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)


def test_a_job_waiting_to_be_profiled_beside_an_idle_host_its_model_keeps_off_says_so(tmp_path: Path) -> None:
    """It said "no T4 GPU is idle" while a T4 host sat idle, one jobs of its model keep off."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("one", "T4", 1, 1.0), ("two", "T4", 1, 1.0)]))
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=100000, max_gpus=1))))
            snap = await wait_for(ctl, lambda s: s.plan_id is not None, 60, "a plan for b")
            await ctl.post(ApprovePlan(snap.plan_id))
            snap = await wait_for(ctl, lambda s: job(s, "b").state is JobState.RUNNING, 60, "b running")
            idle = ({"one", "two"} - set(job(snap, "b").allocation.host_names)).pop()
            ctl.executor.health.avoided[("a", 32)] = {idle}  # a's model died there at once before
            await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=100, max_gpus=1))))
            await wait_for(ctl, lambda s: "keep off" in store.job("a").job.message, 30, "a's wait explained")
            message = store.job("a").job.message
            assert f"the idle T4 GPUs are on {idle}, which jobs of its model keep off" in message, message
            assert "a" not in ctl.executor.profiles
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
