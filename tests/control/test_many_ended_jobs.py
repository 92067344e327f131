"""A lab's store holds thousands of ended jobs: rounds and snapshots read only what they need."""

from __future__ import annotations

from pathlib import Path

from control_lab import write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.snapshot_build import RECENT_DONE_PROFILES, SHOWN_ENDED, build_snapshot
from heet_tui.control.store import Store
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def _store_with_ended_jobs(root: Path, done: int, failed: int) -> Store:
    store = Store(root / "state")
    spec = JobSpec("old", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10))
    for i in range(done + failed):
        job = store.add_job(spec, float(i))
        store.set_state(job.id, JobState.RUNNING, i + 0.1)
        store.set_state(job.id, JobState.FAILED if i < failed else JobState.DONE, i + 0.5)
    store.add_job(JobSpec("live", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10)), 1e6)
    return store


def test_active_jobs_come_alone_and_with_their_history(tmp_path: Path) -> None:
    store = _store_with_ended_jobs(tmp_path, done=30, failed=5)
    active = store.jobs(include_terminal=False)
    assert [r.job.id for r in active] == ["live"] and [s for _, s in active[0].job.history] == [JobState.QUEUED]
    every = store.jobs()
    assert len(every) == 36 and every[0].job.history == store.job(every[0].job.id).job.history
    latest = store.jobs(ended=10)
    assert [r.job.id for r in latest][-1] == "live" and len(latest) == 11
    assert {r.job.id for r in latest[:-1]} == {r.job.id for r in every[25:35]}, "the latest ended ones"


def test_the_latest_ended_are_those_that_ended_last_not_those_submitted_last(tmp_path: Path) -> None:
    store = _store_with_ended_jobs(tmp_path, done=30, failed=1)
    long = store.add_job(JobSpec("long", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10)), -5.0)
    store.set_state(long.id, JobState.RUNNING, 0.0)
    store.set_state(long.id, JobState.DONE, 1e5)  # submitted before all, ended after all
    assert "long" in {r.job.id for r in store.jobs(ended=10)}
    retried = store.jobs()[1].job.id  # failed early, then retried and ended last
    assert store.job(retried).job.state is JobState.FAILED
    store.retry(retried, 2e5, "retried")
    store.set_state(retried, JobState.RUNNING, 2e5 + 1)
    store.set_state(retried, JobState.DONE, 2e5 + 2)
    latest = [r.job.id for r in store.jobs(ended=2)]
    assert set(latest) == {"long", retried, "live"}


def test_a_snapshot_shows_the_latest_ended_jobs_and_counts_them_all(tmp_path: Path) -> None:
    store = _store_with_ended_jobs(tmp_path, done=SHOWN_ENDED + 40, failed=20)
    ctl = Controller(load_hosts(write_local_hosts(tmp_path, [("only", "T4", 1, 1.0)])), store, ControllerOptions())
    snap = build_snapshot(ctl)
    assert len(snap.jobs) == SHOWN_ENDED + 1 and snap.jobs[-1].id == "live"
    assert dict(snap.hidden_ended) == {JobState.DONE: 40, JobState.FAILED: 20}, "the oldest 60 (20 failed) hidden"
    assert len(snap.profiles) == RECENT_DONE_PROFILES + 1
    assert snap.profiles_hidden == SHOWN_ENDED + 60 - RECENT_DONE_PROFILES, "the Profiles screen says how many"
