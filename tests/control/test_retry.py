"""Retrying a failed or cancelled job: ``heet-tui retry``, the Jobs screen's ``r`` (control/retry.py).

Seen: a job that failed at step 40 of 80 on a bad batch, fixed in the script, could only be
submitted anew: a new job in a new checkpoint directory, from step 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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

from heet_tui.cli.main import main
from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import load_job_spec
from heet_tui.control.checkpoint_dirs import CheckpointDirInUse
from heet_tui.control.store import Store
from heet_tui.core.intents import RetryJob, SubmitJob
from heet_tui.core.job import InvalidTransition, Job, JobSpec, JobState, Target, TargetKind

SPEC = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10), checkpoint_dir="/ck/j")


def test_only_a_failed_or_cancelled_job_is_retried_and_only_by_hand() -> None:
    failed = Job("j", SPEC, JobState.FAILED, history=((1.0, JobState.FAILED),))
    again = failed.retried(2.0, "retried")
    assert again.state is JobState.QUEUED and again.history[-1] == (2.0, JobState.QUEUED)
    with pytest.raises(InvalidTransition):
        failed.transition(JobState.QUEUED, 2.0)  # a late report can never revive an ended job
    with pytest.raises(InvalidTransition, match="only a failed or cancelled job"):
        Job("j", SPEC, JobState.DONE).retried(2.0, "retried")


def test_a_job_its_script_ended_short_of_its_target_is_retried_from_its_checkpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A script whose loop ended early exited 0 at step 30 of 400: the job was done for good, retry
    refused it ("only failed or cancelled"), and submitted again it started from step 0."""
    from heet_tui.core.job import retryable

    assert retryable(Job("j", SPEC, JobState.DONE, steps_done=4)) and not retryable(Job("j", SPEC, JobState.DONE,
                                                                                         steps_done=10))
    assert not retryable(Job("j", SPEC, JobState.DONE)), "it reported nothing: done as its script said"
    store = Store(tmp_path / "state")
    own = JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10))  # each its own checkpoint dir
    store.add_job(own, 1.0)
    store.add_job(own, 1.0)  # j-2, done at its target
    for job_id, steps in (("j", 4), ("j-2", 10)):
        store.set_state(job_id, JobState.RUNNING, 2.0)
        store.update_progress(job_id, steps, steps * 32.0, f"/ck/{job_id}/c.pt")
        store.set_state(job_id, JobState.DONE, 3.0, "exited 0")
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "retry", "j-2"]) == 2
    assert "j-2 is done: only failed or cancelled jobs, or done ones short of their target" in capsys.readouterr().err
    assert main([*state, "retry", "j*"]) == 0, "the pattern takes the one short of its target, not the other"
    assert capsys.readouterr().out.strip() == "j queued again; it resumes from its last checkpoint (it had reached step 4)"
    assert (store.job("j").job.state, store.job("j-2").job.state) == (JobState.QUEUED, JobState.DONE)


def test_the_store_queues_it_again_with_its_progress_and_clears_its_crashes(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    store.add_job(SPEC, 1.0)
    store.set_state("j", JobState.RUNNING, 2.0)
    store.update_progress("j", 4, 128, "/ck/j/c.pt")
    for _ in range(3):
        store.count_crash("j")
    store.set_state("j", JobState.FAILED, 3.0, "crashed")
    store.retry("j", 4.0, "retried by you")
    rec = store.job("j")
    assert (rec.job.state, rec.crashes, rec.job.steps_done, rec.checkpoint) == (JobState.QUEUED, 0, 4, "/ck/j/c.pt")
    store.set_state("j", JobState.CANCELLED, 5.0)
    store.add_job(SPEC, 6.0)  # resumes from j's checkpoint directory, as a cancelled job's may be
    with pytest.raises(CheckpointDirInUse, match="in use by job j-2"):
        store.retry("j", 7.0, "retried by you")


def test_retry_from_the_command_line_names_patterns_and_refusals(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.toml"
    spec.write_text('name = "s"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 32\ntarget = { steps = 10 }\n')
    store = Store(tmp_path / "state")
    store.add_jobs([load_job_spec(spec)] * 4, 1.0)  # s, s-2, s-3, s-4
    store.set_state("s", JobState.FAILED, 2.0, "crashed")
    store.set_state("s-2", JobState.CANCELLED, 2.0, "cancelled")
    store.set_state("s-3", JobState.RUNNING, 2.0)
    store.set_state("s-3", JobState.DONE, 3.0)
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "retry", "s-3"]) == 2
    assert "s-3 is done: only failed or cancelled jobs, or done ones short of their target, are retried" in \
        capsys.readouterr().err
    assert main([*state, "retry", "s-4"]) == 2  # queued: not ended
    assert main([*state, "retry", "s", "s-2", "s-9"]) == 2
    assert 'no job "s-9"' in capsys.readouterr().err and store.job("s").job.state is JobState.FAILED
    assert store.job("s").job.state is JobState.FAILED
    capsys.readouterr()
    assert main([*state, "retry", "s*"]) == 0, "a sweep's pattern retries what failed or was cancelled"
    assert capsys.readouterr().out.splitlines() == [
        "s queued again; it resumes from the start (it reported no checkpoint)",
        "s-2 queued again; it resumes from the start (it reported no checkpoint)"]
    assert [r.job.state for r in store.jobs()] == [JobState.QUEUED, JobState.QUEUED, JobState.DONE, JobState.QUEUED]
    store.set_state("s", JobState.RUNNING, 4.0)
    store.update_progress("s", 560, 17920.0, None)  # it saves by itself, naming no checkpoint
    store.set_state("s", JobState.FAILED, 5.0, "crashed")
    assert main([*state, "retry", "s"]) == 0
    assert capsys.readouterr().out.strip() == ("s queued again; it resumes from what its script saved, if anything "
                                               "(it had reached step 560; its progress lines named no checkpoint)")
    # nothing left to retry: said, exit 0 (a pattern with nothing to do is no typo; a nightly retry exited 2)
    assert main([*state, "retry", "s*"]) == 0
    assert "s*: its " in capsys.readouterr().err
    assert main([*state, "jobs", "s", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"][-1]["kind"] == "retry"


def test_a_failed_job_fixed_and_retried_resumes_from_its_checkpoint_and_finishes(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    bug = tmp_path / "bug"
    # a bad batch at step 45 (after the checkpoint at 40, so every retry meets it) until the bug is fixed
    command = crashing_at(tmp_path, "buggy", 45, bug, say="ValueError: bad batch")
    options = fast_retries(1)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "b", steps=80, max_gpus=1, every=20,
                                                   command=[*command, "--checkpoint-every", "20"]))))
            snap = await wait_for(ctl, lambda s: job(s, "b").state is JobState.FAILED, 90, "b to fail")
            assert "bad batch" in job(snap, "b").message
            bug.unlink()  # the script is fixed
            said = await ctl.post(RetryJob("b"))
            assert said == "b queued again; it resumes from its last checkpoint (it had reached step 45)", said
            await wait_for(ctl, lambda s: job(s, "b").state is JobState.DONE, 90, "b to finish")

    run_and_clean(scenario, tmp_path)
    launches = [e.message for e in store.events("b", limit=100) if e.kind == "launch"]
    assert len(launches) == 3, launches  # the first try, its one retry, and the retry by hand
    logs = sorted((tmp_path / "w-only").glob("**/logs/b.r0.*.log"))
    assert "resumed from" in logs[-1].read_text() and store.job("b").job.steps_done == 80


def test_a_retried_jobs_took_says_how_much_came_after_its_retry(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A job that sat failed over a weekend "took 2d03h" for two hours of training."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("a", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 1000.0)
    store.set_state("a", JobState.FAILED, 1100.0, "exit 1")
    store.retry("a", 180_000.0, "retried")
    store.set_state("a", JobState.RUNNING, 180_010.0)
    store.set_state("a", JobState.DONE, 187_200.0)
    assert main(["--state", str(tmp_path / "state"), "jobs", "a"]) == 0
    assert "  took       2d03h (2h00m of it since its retry)" in capsys.readouterr().out


def test_a_job_id_gives_way_only_to_its_spec_submitted_again_after_it_ended(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An id in the wrong state gave way to any job of the same name: `retry sw` while sw ran
    restarted the cancelled sw-2 from scratch, and `cancel sw` run twice stopped sw-2 the second
    time (both submitted together, as a sweep submitted twice)."""
    spec = tmp_path / "job.toml"
    spec.write_text('name = "sw"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 32\n'
                    'target = { steps = 10 }\n')
    store = Store(tmp_path / "state")
    store.add_jobs([load_job_spec(spec)] * 2, 1.0)  # sw, sw-2
    store.set_state("sw", JobState.RUNNING, 2.0)
    store.set_state("sw-2", JobState.CANCELLED, 2.0, "cancelled")
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "retry", "sw"]) == 2
    assert ("sw is running: only failed or cancelled jobs, or done ones short of their target, are retried (sw-2, "
            "of the same name, is cancelled: retry it by that id)" in capsys.readouterr().err)
    assert store.job("sw-2").job.state is JobState.CANCELLED
    store.set_state("sw", JobState.CANCELLED, 3.0, "cancelled")
    store.retry("sw-2", 4.0, "queued again")
    store.set_state("sw-2", JobState.RUNNING, 5.0)
    assert main([*state, "cancel", "sw"]) == 0  # again: a script's cleanup step run twice
    assert "sw is already cancelled (sw-2, of the same name, is running: cancel it by that id)" in \
        capsys.readouterr().out
    assert not store.job("sw-2").cancel_requested
