"""The job life cycle: only the documented transitions exist; terminal states never change."""

from __future__ import annotations

import pytest

from heet_tui.core.job import InvalidTransition, Job, JobSpec, JobState, Target, TargetKind, can_transition

SPEC = JobSpec("j", ("python3", "t.py"), "cifar10", 64, Target(TargetKind.STEPS, 10))


def test_elastic_loop_and_restart_count() -> None:
    job = Job("j1", SPEC)
    for state in (JobState.PROFILING, JobState.RUNNING, JobState.RESIZING, JobState.RUNNING,
                  JobState.RESIZING, JobState.RUNNING, JobState.DONE):
        job = job.transition(state, at=1.0)
    assert job.state is JobState.DONE and job.restarts == 2
    assert [s for _, s in job.history][-1] is JobState.DONE



def test_every_relaunch_counts_as_a_restart_not_only_a_resize() -> None:
    job = Job("j1", SPEC)
    for state in (JobState.PROFILING, JobState.QUEUED, JobState.RUNNING):  # the first start is none
        job = job.transition(state, at=1.0)
    assert job.restarts == 0
    for state in (JobState.QUEUED, JobState.RUNNING,  # preempted, or its host lost, then relaunched
                  JobState.RESIZING, JobState.RUNNING):  # resized
        job = job.transition(state, at=2.0)
    assert job.restarts == 2


@pytest.mark.parametrize("terminal", [JobState.DONE, JobState.FAILED, JobState.CANCELLED])
def test_terminal_states_are_final(terminal: JobState) -> None:
    assert terminal.terminal
    for state in JobState:
        assert not can_transition(terminal, state)


def test_invalid_transition_says_which() -> None:
    with pytest.raises(InvalidTransition, match="job 'j1': cannot go from queued to resizing"):
        Job("j1", SPEC).transition(JobState.RESIZING, at=0.0)


def test_preempted_job_returns_to_queue() -> None:
    job = Job("j1", SPEC).transition(JobState.RUNNING, 0.0).transition(JobState.QUEUED, 1.0, "host lost")
    assert job.state is JobState.QUEUED and job.message == "host lost"
