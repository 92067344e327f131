"""A generation cut off from the controller that finished the job makes the job done.

Seen over SSH: a host's sshd hung, the host was declared lost after the grace period and the
job relaunched elsewhere (from step 0: the checkpoint could not be copied off the hung host),
while the cut-off generation trained on and reached the target there, exit code 0. When the
host came back, that exit was never looked at, and the job trained all over again.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.cluster.events import RemoteJob
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions, Executor
from heet_tui.control.recovery import judge_reported
from heet_tui.control.runtime import rank_agent_id
from heet_tui.control.store import Store
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

STEPS = 400  # outlasts the first controller's stop: at 60 a fast run was done before it (the case lost)


def _exit_of(root: Path, generation: int) -> dict | None:
    for path in root.glob(f"w-*/**/exits/*-g{generation}.json"):
        status = json.loads(path.read_text() or "{}")
        if status.get("exit_code") is not None:
            return status
    return None


def test_the_job_is_done_when_a_cut_off_generation_finished_it(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("cut", "A100", 1, 1.0), ("other", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False)

    async def scenario() -> None:
        first = Controller(hosts, store, options)
        await first.start()
        try:
            await first.post(SubmitJob(str(write_job(tmp_path, "a", steps=STEPS, max_gpus=1))))
            snap = await wait_for(first, lambda s: store.job("a").job.steps_done >= 5, 90, "a running")
        finally:
            await first.stop()  # as a partition looks from the host: nobody listens, it trains on
        assert not store.job("a").job.state.terminal, "the case this test is about: it trains on unwatched"
        (host,) = job(snap, "a").allocation.host_names
        deadline = time.monotonic() + 90
        while _exit_of(tmp_path, 1) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _exit_of(tmp_path, 1)["exit_code"] == 0, "generation 1 finished where it was"
        # Meanwhile the controller had given the job up on that host and started generation 2 elsewhere.
        elsewhere = "other" if host == "cut" else "cut"
        store.record_allocation(Allocation.of("a", "A100", {elsewhere: [0]}), store.next_generation("a"), time.time())

        again = Controller(hosts, store, options)
        await again.start()
        try:
            await wait_for(again, lambda s: store.job("a").job.state.terminal, 90, "a ended")
        finally:
            await again.stop()
        rec = store.job("a")
        assert rec.job.state is JobState.DONE and rec.job.steps_done == STEPS, (rec.job.state, rec.job.message)
        assert f"generation 1 finished on {host}" in rec.job.message
        assert [e.kind for e in store.events("a", limit=100)].count("launch") == 1, "not trained again"
        # its checkpoint is the finished copy's, where it finished: it named the stopped newer run's
        from heet_tui.control.checkpoint_hosts import SETTING

        assert json.loads(store.setting(SETTING))["a"] == host
        assert rec.checkpoint is not None, "and the path it named"

    run_and_clean(scenario, tmp_path)


def test_only_our_own_finished_rank_zero_past_the_target_counts(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("a", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.record_allocation(Allocation.of("a", "T4", {"h": [0]}), store.next_generation("a"), 1.0)
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    ours, theirs = rank_agent_id("a", 0, store.store_id), rank_agent_id("a", 0, "f" * 32)
    done = {"step": 100, "samples": 3200}
    reports = (RemoteJob("h", ours, 1, "exited", exit_code=0, progress=done),
               RemoteJob("h", ours, 1, "exited", exit_code=0, progress={"step": 90, "samples": 2880}),
               RemoteJob("h", ours, 1, "exited", exit_code=143, progress=done),
               RemoteJob("h", rank_agent_id("a", 1, store.store_id), 1, "exited", exit_code=0, progress=done),
               RemoteJob("h", theirs, 1, "exited", exit_code=0, progress=done),
               RemoteJob("h", ours, 2, "exited", exit_code=0, progress=done))  # a generation never launched
    verdicts = [v.action for v in judge_reported(executor, store, "h", reports)]
    # the last, a generation this store never launched, is a newer copy's: remembered, never acted on
    assert verdicts == ["finished", "ignore", "ignore", "ignore", "ignore", "newer-ended"]


def test_a_finish_reported_by_a_host_the_generation_never_ran_on_is_ignored(tmp_path: Path) -> None:
    """Any agent learns the store's id at its hello: a compromised host (or an agent state file
    restored from a backup) reported another host's job finished, and the controller stopped the
    job's real run and marked it done for good at 49 of 400 steps."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("a", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.record_allocation(Allocation.of("a", "T4", {"h": [0], "i": [0]}), store.next_generation("a"), 1.0)
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    forged = RemoteJob("x", rank_agent_id("a", 0, store.store_id), 1, "exited", exit_code=0,
                       progress={"step": 100, "samples": 3200})
    assert [v.action for v in judge_reported(executor, store, "x", (forged,))] == ["ignore"]
    assert [v.action for v in judge_reported(executor, store, "i", (replace(forged, host="i"),))] == ["ignore"], \
        "nor by a host of the generation where its rank 0 did not run"
    assert [v.action for v in judge_reported(executor, store, "h", (replace(forged, host="h"),))] == ["finished"]


def test_the_stopped_newer_run_does_not_lower_the_finished_jobs_progress(tmp_path: Path) -> None:
    """A cut-off copy finished the job (step 1500); the newer run, stopped for it, then reported
    its own step 777 as current, and the job read "done" at 52 %."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("a", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 1500)), 0.0)
    store.set_state("a", JobState.RUNNING, 1.0)
    store.update_progress("a", 1500, 48000.0, None)
    store.set_state("a", JobState.DONE, 2.0, "generation 1 finished on h")
    store.update_progress("a", 777, 777 * 32.0, None, current=True)
    assert (store.job("a").job.steps_done, store.job("a").job.samples_done) == (1500, 48000.0)


def test_a_stale_rank_zero_claimed_by_a_host_it_never_ran_on_leaves_no_checkpoint_to_take(tmp_path: Path) -> None:
    """A compromised host claimed a stale rank 0 of a job running elsewhere, at step 1,900: the
    job's run was stopped and went on from the checkpoint the host had planted."""
    import asyncio

    from heet_tui.control.recovery import reconcile_host

    class Fences:
        fenced: list[tuple[str, str, int]] = []

        async def fence(self, host: str, job_id: str, generation: int) -> None:
            self.fenced.append((host, job_id, generation))

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("victim", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 4000)), 0.0)
    for generation in (1, 2):
        store.record_allocation(Allocation.of("victim", "A100", {"good": [0]}), store.next_generation("victim"),
                                float(generation))
    store.set_state("victim", JobState.RUNNING, 3.0)
    store.update_progress("victim", 174, 174 * 32.0, None)
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    claim = RemoteJob("evil", rank_agent_id("victim", 0, store.store_id), 1, "running",
                      progress={"step": 1900, "samples": 1900 * 32})
    asyncio.run(reconcile_host(executor, store, Fences(), "evil", (claim,), 10.0))
    assert Fences.fenced == [("evil", claim.job_id, 2)], "fenced, as any stale copy is"
    assert executor.checkpoints.left_behind() == {}, "no checkpoint of it on a host its rank 0 never ran on"


def test_a_run_claimed_before_its_job_was_submitted_does_not_hold_the_job(tmp_path: Path) -> None:
    """A compromised host claimed a run of "starve" (generation 7) before anyone submitted it;
    submitted 13 s later, the job sat queued for good beside an idle GPU, "a newer copy started it"."""
    import asyncio

    from heet_tui.control.newer_copies import runs_elsewhere
    from heet_tui.control.recovery import reconcile_host

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("known", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    claims = (RemoteJob("evil", rank_agent_id("starve", 0, store.store_id), 7, "running"),
              RemoteJob("evil", rank_agent_id("known", 0, store.store_id), 7, "running"))

    class Evil:
        def jobs(self, host: str) -> tuple[RemoteJob, ...]:
            return claims if host == "evil" else ()

    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    asyncio.run(reconcile_host(executor, store, Evil(), "evil", claims, 10.0))
    store.add_job(JobSpec("starve", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 23.0)
    assert not runs_elsewhere(Evil(), store, executor.newer_copies, store.job("starve").job)
    assert runs_elsewhere(Evil(), store, executor.newer_copies, store.job("known").job), \
        "a job this store had when a host said a newer copy runs it is still left to that copy"


def test_a_generation_seen_to_end_is_not_taken_back_from_its_host(tmp_path: Path) -> None:
    """A compromised host claimed that generation 1, which the controller had stopped for a move
    and seen exit, finished at the target: the job's run elsewhere was stopped and the job marked
    done. It also claimed that generation running at a step far ahead, and the job went on from the
    files it had planted."""
    import asyncio

    from heet_tui.control.recovery import reconcile_host
    from heet_tui.control.runtime import RankProc, Run
    from heet_tui.control.seen_exits import ended_seen

    class Fences:
        fenced: list[tuple[str, str, int]] = []

        async def fence(self, host: str, job_id: str, generation: int) -> None:
            self.fenced.append((host, job_id, generation))

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("a", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.record_allocation(Allocation.of("a", "T4", {"h": [0]}), store.next_generation("a"), 1.0)
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    agent_id = rank_agent_id("a", 0, store.store_id)
    finished = RemoteJob("h", agent_id, 1, "exited", exit_code=0, progress={"step": 100, "samples": 3200})
    assert [v.action for v in judge_reported(executor, store, "h", (finished,))] == ["finished"], "unseen: taken"
    run = Run("a", Allocation.of("a", "T4", {"h": [0]}), 1, {0: RankProc("h", agent_id, 0, (0,), "running")}, 1.0)
    executor.runs["a"] = run
    try:
        executor.on_exit(RemoteJob("h", agent_id, 1, "exited", exit_code=143, reason="stopped"))
    except Exception:  # noqa: BLE001 - what follows an exit needs a cluster; the exit is noted first
        pass
    assert ended_seen(store, "a", 1)
    executor.runs.clear()
    store.record_allocation(Allocation.of("a", "T4", {"g": [0]}), store.next_generation("a"), 2.0)
    assert [v.action for v in judge_reported(executor, store, "h", (finished,))] == ["ignore"]
    ahead = RemoteJob("h", agent_id, 1, "running", progress={"step": 95, "samples": 95 * 32})
    asyncio.run(reconcile_host(executor, store, Fences(), "h", (ahead,), 10.0))
    assert Fences.fenced == [("h", agent_id, 2)], "fenced, as any stale copy is"
    assert executor.checkpoints.left_behind() == {}, "and its claimed checkpoint not taken"


def test_many_runs_this_store_never_launched_are_said_once_not_each(tmp_path: Path) -> None:
    """A host listing 200 such runs gave 200 notices ("a newer copy of ... started it") and events
    at every reconnect."""
    import asyncio

    from heet_tui.control.recovery import MAX_CLAIMS_SAID, reconcile_host

    store = Store(tmp_path / "state")
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    ghosts = tuple(RemoteJob("h", rank_agent_id(f"ghost{i}", 0, store.store_id), 1, "running", gpus=(0,))
                   for i in range(200))
    notes = asyncio.run(reconcile_host(executor, store, None, "h", ghosts, 10.0))
    assert len(notes) == MAX_CLAIMS_SAID + 1, notes
    assert notes[0].startswith(f"h also runs {200 - MAX_CLAIMS_SAID} more processes this state store never launched")
    assert len([e for e in store.events(limit=500) if e.kind == "host"]) == MAX_CLAIMS_SAID + 1


def test_a_claim_far_past_this_stores_generations_is_not_remembered_as_a_newer_copy(tmp_path: Path) -> None:
    """A compromised host listed g1 at generation 2**31-1, "exited": remembered as a newer copy's,
    it made g1's next launch 2**31, refused on the wire while the process ran on an honest host,
    whose every heartbeat and hello were then refused too: that host was out for good."""
    from heet_tui.control.newer_copies import highest, remember

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("g1", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.record_allocation(Allocation.of("g1", "T4", {"h": [0]}), store.next_generation("g1"), 1.0)
    executor = Executor(None, None, store, ThroughputBook(), ExecOptions())
    agent_id = rank_agent_id("g1", 0, store.store_id)
    claims = (RemoteJob("a", agent_id, 2**31 - 1, "exited", exit_code=0), RemoteJob("a", agent_id, 500, "running"),
              RemoteJob("a", rank_agent_id("new", 0, store.store_id), 2**31 - 1, "exited"),
              RemoteJob("a", agent_id, 3, "exited"))
    assert [v.action for v in judge_reported(executor, store, "a", claims)] == ["ignore", "fence", "ignore",
                                                                                 "newer-ended"]
    remember(store, [(agent_id, 2**31 - 1)])  # as an earlier version stored it
    assert highest(store, "g1") == 0, "an absurd remembered generation is not believed"
    assert store.next_generation("g1", past=highest(store, "g1")) == 2


def test_a_launch_refused_on_its_host_is_never_believed_to_have_finished_there(tmp_path: Path) -> None:
    """A host answered a launch "GPU 0 is held by another process" while it started the job and hid
    it, then said generation 1 finished at the target: the job's real run elsewhere was stopped
    and the job marked done, 24 s after it was submitted."""
    import asyncio

    from heet_tui.cluster import AgentRequestError
    from heet_tui.control.launch import LaunchSpec
    from heet_tui.control.runtime import RankProc, Run

    class Refusing:
        async def launch(self, *args, **kwargs):
            raise AgentRequestError("GPU 0 is held by another process")

        async def stop_job(self, *args, **kwargs):
            return None

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("k1", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 300)), 0.0)
    alloc = Allocation.of("k1", "T4", {"a": [0]})
    store.record_allocation(alloc, store.next_generation("k1"), 1.0)
    executor = Executor(Refusing(), None, store, ThroughputBook(), ExecOptions())
    agent_id = rank_agent_id("k1", 0, store.store_id)
    run = Run("k1", alloc, 1, {0: RankProc("a", agent_id, 0, (0,), "launching")}, 1.0)

    async def launch() -> None:
        await executor._send_launches(run, [LaunchSpec("a", agent_id, 0, ("python3", "t.py"), (), (0,), None)])
        await executor.close()

    asyncio.run(launch())
    finished = RemoteJob("a", agent_id, 1, "exited", exit_code=0, progress={"step": 300, "samples": 9600})
    assert [v.action for v in judge_reported(executor, store, "a", (finished,))] == ["ignore"]
