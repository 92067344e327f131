"""A running job that stops printing progress without exiting (hung) is stopped and retried.

Before, a script blocked in a collective or on a dead filesystem showed as running, holding its
GPUs, until a person noticed. The scenario runs a real hung process on a local-transport agent:
it ignores SIGTERM, as a process stuck in a C call does, so the agent's kill after the grace
period is what ends it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, started_controller, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import parse_job_text
from heet_tui.control.codec import spec_from_json, spec_to_json
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.runtime import Outcome, RankProc, Run, judge
from heet_tui.control.stalls import clock, quiet_message, quiet_note, stall_limit, stalled
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

HANG = '''
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stuck in a C call: a polite stop does nothing
with open(sys.argv[1], "a") as pids:
    pids.write(f"{os.getpid()}\\n")
for step in (5, 10):
    print("@heet-progress " + json.dumps({"step": step, "samples": step * 32, "samples_per_s": 100.0}))
    time.sleep(0.2)
print("waiting for the other ranks...")
while True:
    time.sleep(1)
'''


def _alive(pid: int) -> bool:
    """Running, not a zombie (an orphan here may wait for a container's init that never reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _spec(stall: int | None = None) -> JobSpec:
    return JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100), stall_timeout_s=stall)


def _run(progress_at: float | None, state: str = "running", profiling: bool = False) -> Run:
    run = Run("j", Allocation.of("j", "A100", {"h": [0]}), 1, {0: RankProc("h", "j.r1", 0, (0,), state)},
              started_at=100.0, profiling=profiling)
    if progress_at is not None:
        run.progress, run.progress_at, run.reports = {"step": 40}, progress_at, 3
    return run


def test_the_limit_is_the_specs_else_the_default_and_zero_turns_it_off() -> None:
    assert stall_limit(_spec(), 1800) == 1800
    assert stall_limit(_spec(120), 1800) == 120
    assert stall_limit(_spec(0), 1800) is None


def test_only_a_watched_run_silent_past_its_limit_counts_as_stalled() -> None:
    spec = _spec(600)
    quiet = _run(progress_at=200.0)
    found = stalled([quiet], lambda _: spec, now=200.0 + 600, default_s=1800)
    assert [run for run, _ in found] == [quiet]
    assert found[0][1] == "stalled: no progress report in its stall_timeout of 10m00s (the last at step 40)"
    assert not stalled([quiet], lambda _: spec, now=200.0 + 599, default_s=1800)
    never = _run(progress_at=None)  # counted from its launch
    assert "none since its launch" in stalled([never], lambda _: spec, now=700.0, default_s=1800)[0][1]
    stopping = _run(progress_at=None)
    stopping.stop_reason = "resize"
    host_out = _run(progress_at=None, state="unknown")  # its host dropped out: host_grace decides
    profiling = _run(progress_at=None, profiling=True)  # unmeasured.py has its own limit
    assert not stalled([stopping, host_out, profiling], lambda _: spec, now=10_000.0, default_s=1800)
    assert not stalled([_run(None)], lambda _: _spec(0), now=10_000.0, default_s=1800)
    assert not stalled([_run(None)], lambda _: None, now=10_000.0, default_s=1800)  # not in the store


def test_the_message_warns_a_third_of_the_way_and_a_stalled_stop_is_a_crash() -> None:
    run = _run(progress_at=1000.0)
    assert quiet_note(run, _spec(1800), now=1000.0 + 599, default_s=1800) is None
    note = quiet_note(run, _spec(1800), now=1000.0 + 600, default_s=1800)
    assert note is not None and note.startswith("no progress report for 10m00s") and "at 30m00s" in note
    assert quiet_note(run, _spec(0), now=1e6, default_s=1800) is None
    stored = quiet_message(run, _spec(1800), now=1000.0 + 600, default_s=1800)
    assert stored is not None and stored == quiet_message(run, _spec(1800), now=1000.0 + 900, default_s=1800), \
        "written once: it does not move with the clock"
    assert f"since {clock(1000.0)} (the last at step 40); stopped as hung at {clock(2800.0)}" in stored
    assert quiet_message(run, _spec(1800), now=1000.0 + 599, default_s=1800) is None
    found = _run(progress_at=None)
    found.found_at_restart = True  # what came before the restart is not known: "since its launch" was wrong
    assert "(none since this controller found it running)" in quiet_note(found, _spec(1800), 100.0 + 600, 1800)
    assert "(none since its launch)" in quiet_note(_run(progress_at=None), _spec(1800), 100.0 + 600, 1800)
    run.stop_reason = "stalled: no progress report in its stall_timeout of 30m00s"
    for rank in run.ranks.values():
        rank.state, rank.signal = "exited", 9
    assert judge(run, _spec()) == (Outcome.CRASHED, run.stop_reason)


def test_the_spec_key_is_checked_and_kept_in_the_store(tmp_path: Path) -> None:
    base = 'name = "j"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\ntarget = { steps = 5 }\n'
    assert parse_job_text(base + "stall_timeout = 900\n", tmp_path / "j.toml").stall_timeout_s == 900
    assert parse_job_text(base, tmp_path / "j.toml").stall_timeout_s is None
    with pytest.raises(ValueError, match=r"j.toml:6.*stall_timeout.*out of range"):
        parse_job_text(base + "stall_timeout = -1\n", tmp_path / "j.toml")
    spec = parse_job_text(base + "stall_timeout = 0\n", tmp_path / "j.toml")
    assert spec_from_json(spec_to_json(spec)) == spec
    older = spec_to_json(spec).replace(', "stall_timeout_s": 0', "")  # a store written before the key
    assert spec_from_json(older).stall_timeout_s is None


def _one_host_retrying_once(tmp_path: Path, stop_grace_s: float):
    """Hosts, store and options: one emulated A100, plans applied unasked, one retry soon after a crash."""
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False,
                                execution=ExecOptions(max_retries=1, retry_backoff_s=0.2, stop_grace_s=stop_grace_s))
    return load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)])), Store(tmp_path / "state"), options


def test_a_hung_job_is_stopped_retried_and_failed_with_the_lines_that_show_where_it_hung(tmp_path: Path) -> None:
    hosts, store, options = _one_host_retrying_once(tmp_path, stop_grace_s=1.0)
    script, pids = tmp_path / "hang.py", tmp_path / "pids"
    script.write_text(HANG)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "hung", steps=100, max_gpus=1,
                                                   command=[sys.executable, str(script), str(pids)],
                                                   extra="stall_timeout = 4\n"))))
            snap = await wait_for(ctl, lambda s: job(s, "hung").message.startswith("no progress report"), 60,
                                  "the running job's message to say it has been silent")
            assert job(snap, "hung").state is JobState.RUNNING and job(snap, "hung").eta_s is None
            # and the store says so too: `heet-tui jobs` and --json read "running on 1xA100" to the stop
            await wait_for(ctl, lambda s: store.job("hung").job.message.startswith("no progress report since "),
                           30, "the stored message to say it has been silent")
            assert "stopped as hung at" in store.job("hung").job.message
            snap = await wait_for(ctl, lambda s: "retry 1/1" in job(s, "hung").message, 60, "the first stall")
            assert "stalled: no progress report in its stall_timeout of 4s" in job(snap, "hung").message
            assert "the last at step 10" in job(snap, "hung").message
            snap = await wait_for(ctl, lambda s: job(s, "hung").state is JobState.FAILED, 90, "the job to fail")
        finally:
            await ctl.stop()
        hung = job(snap, "hung")
        assert "stalled" in hung.message and "waiting for the other ranks..." in hung.message
        assert store.job("hung").crashes == 2, "first try + 1 retry"
        launched = [int(p) for p in pids.read_text().split()]
        assert len(launched) == 2
        assert not [pid for pid in launched if _alive(pid)], "the agent kills each hung process"

    run_and_clean(scenario, tmp_path)


BUFFERED = '''
import json, os, signal, sys, time
out = open(1, "w", buffering=65536, closefd=False)  # block-buffered whatever PYTHONUNBUFFERED says
signal.signal(signal.SIGTERM, lambda *_: (out.flush(), os._exit(143)))  # saves, flushes, exits as stopped
for step in range(1, 40):
    out.write("@heet-progress " + json.dumps({"step": step, "samples": step * 32, "samples_per_s": 100.0}) + "\\n")
    time.sleep(0.02)
while True:
    time.sleep(1)
'''


def test_a_script_whose_progress_lines_come_only_when_it_is_stopped_is_told_to_flush(tmp_path: Path) -> None:
    """Seen: "stalled: no progress report ... (none since its launch)", and its last log line a
    progress line at step 1030: the lines reached the log when the stop flushed them."""
    hosts, store, options = _one_host_retrying_once(tmp_path, stop_grace_s=2.0)
    script = tmp_path / "buffered.py"
    script.write_text(BUFFERED)

    async def scenario() -> None:
        async with started_controller(hosts, store, options) as ctl:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "buf", steps=1000, max_gpus=1,
                                                   command=[sys.executable, str(script)], extra="stall_timeout = 3\n"))))
            snap = await wait_for(ctl, lambda s: job(s, "buf").state is JobState.FAILED, 90, "the job to fail")
            assert "(none since its launch); its progress lines reached its log only when it was stopped" in \
                job(snap, "buf").message and "flush stdout after each line" in job(snap, "buf").message

    run_and_clean(scenario, tmp_path)


def test_buffered_lines_that_arrive_after_the_crash_was_handled_still_bring_the_hint(tmp_path: Path) -> None:
    """Over SSH the exit was handled before the flushed lines came: the job read only "stalled: no
    progress report ... (none since its launch)", and then showed 71 steps."""
    from heet_tui.control.progress_reports import record_unseen_progress
    from heet_tui.control.stalls import BUFFERED

    store = Store(tmp_path / "state")
    store.add_job(_spec(stall=20), 0.0)
    stalled_why = "stalled: no progress report in its stall_timeout of 20s (none since its launch)"
    store.set_state("j", JobState.RUNNING, 1.0)
    store.set_state("j", JobState.QUEUED, 2.0, f"{stalled_why}; retry 1/2 in 2 s")
    run = _run(None)
    run.stop_reason = stalled_why
    record_unseen_progress(store, run, run.ranks[0], {"step": 71, "samples": 2272, "samples_per_s": 90.0})
    assert store.job("j").job.message == f"{stalled_why}; retry 1/2 in 2 s; {BUFFERED}"
    record_unseen_progress(store, run, run.ranks[0], {"step": 72, "samples": 2304, "samples_per_s": 90.0})
    assert [e.kind for e in store.events("j")].count("warning") == 1, "said once"
