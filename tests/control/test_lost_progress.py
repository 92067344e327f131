"""A relaunched job that reports a step behind the one it had reached says so (progress_reports.py).

Seen on the local config: a resize's SIGTERM killed a script's DataLoader workers, its main
process raised before it saved, and the next launch trained from step 0 while the job's row
still showed step 600. Nothing said 600 steps were being trained again.
"""

from __future__ import annotations

import re
from pathlib import Path

from control_lab import (
    crashing_at,
    fast_retries,
    job,
    run_and_clean,
    started_controller,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.progress_reports import note_lost_progress, remember_exit_step
from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def test_a_crash_after_the_last_checkpoint_warns_of_the_steps_trained_again(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    # checkpoints only on a stop: the crash at step 100 leaves none, so the retry starts at step 0
    command = crashing_at(tmp_path, "crashy", 100, tmp_path / "crash-once", once=True, pace_s=0.1)
    options = fast_retries(2)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "c", steps=110, max_gpus=1,
                                                   command=[*command, "--checkpoint-every", "0"]))))
            await wait_for(ctl, lambda s: job(s, "c").state is JobState.DONE, 90, "c to finish")

    run_and_clean(scenario, tmp_path)
    warnings = [e.message for e in store.events("c", limit=100) if e.kind == "warning"]
    assert len(warnings) == 1, warnings
    said = re.match(r"c resumed behind where it was: generation \d+ reports step (\d+), and its last launch had "
                    r"reached step 100, so about (\d+) steps are trained again", warnings[0])
    assert said, warnings[0]
    # the agent forwards the latest line it finds, so the first one seen may be a few reports in
    assert 0 < int(said[1]) < 100 and int(said[2]) == 100 - int(said[1])
    launches = [e for e in store.events("c", limit=100) if e.kind == "launch"]
    assert len(launches) == 2, "the first launch and its retry; the job's first launch warned of nothing"


def test_only_a_launch_behind_the_previous_one_warns(tmp_path: Path) -> None:
    """Compared with the furthest step instead, every relaunch after one loss warned, although it
    resumed exactly where its predecessor had stopped (seen in the SSH lab after a drain)."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    last: dict[str, int] = {}

    def launch(generation: int, steps: list[int], adopted: bool = False, exit_step: int | None = None) -> None:
        run = Run("j", Allocation.of("j", "T4", {"h": [0]}), generation, {}, 0.0,
                  start_samples=None if adopted else 0.0)
        for step in steps:
            run.reports += 1
            note_lost_progress(store, run, {"step": step}, last, float(generation))
            store.update_progress("j", step, step * 32.0, None, current=True)
        if exit_step is not None:  # the agent's exit report repeats the line it printed last
            remember_exit_step(last, run, RankProc("h", "j.r0", 0, (0,)), {"step": exit_step})

    launch(1, [10, 20, 30])  # crashed at 30 with no checkpoint
    launch(2, [5, 10])  # from scratch
    launch(3, [15, 20])  # stopped at 10 with a checkpoint, resumed there: nothing lost, though behind 30
    last.clear()  # a restarted controller: its memory starts empty
    launch(4, [25], adopted=True)  # ... and it found generation 4 running, which reached step 25
    last.clear()  # restarted again, while 4 lost its checkpoint with its host
    launch(5, [5], exit_step=12)  # from the store's step 25; crashed at 12, after the last line seen (5)
    launch(6, [10])
    launch(7, [], exit_step=3)  # crashed at 3, its only line unseen: it had reached 3, not 10
    launch(8, [2])
    warned = [e.message for e in store.events("j", limit=20) if e.kind == "warning"]
    assert len(warned) == 4, warned
    assert "generation 2 reports step 5, and its last launch had reached step 30" in warned[0]
    assert "generation 5 reports step 5, and its last launch had reached step 25" in warned[1]
    assert "generation 6 reports step 10, and its last launch had reached step 12," in warned[2]
    assert "generation 8 reports step 2, and its last launch had reached step 3," in warned[3]


def test_a_fenced_stale_copy_that_trained_past_the_job_says_what_was_lost(tmp_path: Path) -> None:
    """Seen: a copy cut off on its host trained on to step 723 while the relaunch elsewhere was at
    220; when the host came back it was fenced with "stopped stale ..." and nothing more."""
    from heet_tui.cluster.events import RemoteJob
    from heet_tui.control.recovery import _trained_on

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 1000)), 0.0)
    store.update_progress("j", 220, 220 * 32.0, None, current=True)
    ahead = RemoteJob("h", "j.r0.abc", 2, "running", progress={"step": 723, "samples": 723 * 32})
    assert _trained_on(store, "j", ahead).startswith(": it had trained on to step 723 while cut off")
    assert "past the job's 220" in _trained_on(store, "j", ahead)
    for behind in (RemoteJob("h", "j.r0.abc", 2, "running", progress={"step": 200}),
                   RemoteJob("h", "j.r0.abc", 2, "running")):
        assert _trained_on(store, "j", behind) == ""
    store.set_state("j", JobState.CANCELLED, 5.0)  # cancelled while its host was out: no newer generation
    assert _trained_on(store, "j", ahead) == (": it had run on to step 723, past the 220 on record, before the stop "
                                              "of the cancelled job reached it")
    while store.job("j").generation < 2:  # the job's own latest run, cancelled while no controller ran
        store.next_generation("j")
    # it said "while its host was out of reach" (the host never was) and "those steps are lost"
    assert _trained_on(store, "j", ahead).endswith("reached it (its checkpoint there keeps them for a retry)")
    level = RemoteJob("h", "j.r0.abc", 2, "running", progress={"step": 220})
    assert _trained_on(store, "j", level) == "", "it read \"run on to step 220, past the 220 on record\""


def test_a_fenced_copys_steps_are_said_lost_only_where_no_shared_checkpoint_directory_kept_them() -> None:
    """Seen: "those steps are lost" of a copy whose last save, in the checkpoint directory its hosts
    share, the newer generation had resumed from (step 6100, past the 6095 said lost)."""
    from heet_tui.config.hosts_file import HostEntry
    from heet_tui.control.recovery import lost_steps_note

    shared, own = HostEntry("c1", "c1"), HostEntry("c1", "c1", shared_fs=False)
    assert "the newer generation resumes from: only steps after its last save there are lost" in lost_steps_note(shared)
    assert lost_steps_note(own) == "; those steps are lost (the newer generation goes on from its own checkpoint)"
    assert lost_steps_note(None) == lost_steps_note(own), "a host gone from the file: nothing known of it"


def test_a_stop_seen_through_while_no_controller_watched_clears_the_out_of_reach_clause(tmp_path: Path) -> None:
    """Cancelled, the controller killed, the run killed by its agent at the end of its grace: the
    restarted controller said "its run on h1 (out of reach) is stopped when the host is back" for
    good, with h1 ready and the run long gone."""
    from heet_tui.cluster.events import RemoteJob
    from heet_tui.control.recovery import said_ended

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 1000)), 0.0)
    store.next_generation("j")
    said = "cancelled; its run on h1 (out of reach) is stopped when the host is back"
    store.set_state("j", JobState.CANCELLED, 5.0, said)
    said_ended(store, "h2", (RemoteJob("h2", "j.r0.abcd1234", 1, "exited"),), 6.0)
    assert store.job("j").job.message == said, "another host's report"
    said_ended(store, "h1", (RemoteJob("h1", "j.r0.abcd1234", 1, "running"),), 6.0)
    assert store.job("j").job.message == said, "still running there"
    said_ended(store, "h1", (RemoteJob("h1", "j.r0.abcd1234", 1, "exited"),), 7.0)
    assert store.job("j").job.message == "cancelled"
