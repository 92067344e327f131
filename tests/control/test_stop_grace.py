"""A job's stop grace (SIGTERM to SIGKILL) comes from its spec, and a job that needs more than
it has is told so: before its first stop (its checkpoints take most of the grace to save) and
after a stop killed it mid-save.

The scenario runs examples/training.py with ``torch.save`` slowed down, as a large model on a
network filesystem saves, on a local-transport agent: the kill is the agent's real SIGKILL.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch
from control_lab import job, run_and_clean, training_with, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.config.job_spec import parse_job_text
from heet_tui.control.codec import spec_from_json, spec_to_json
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.launch import plan_launch, plan_profile_launch
from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.stop_grace import (
    FAILED_AT_STOP,
    KILLED_AT_STOP,
    SLOW_STOP,
    grace_s,
    note_killed_at_stop,
    warn_slow_stop,
)
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import CancelJob, SubmitJob
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind

SLOW_SAVE = "import torch\n_save = torch.save\ntorch.save = lambda *a, **k: (time.sleep({}), _save(*a, **k))[1]"
BASE = 'name = "j"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\ntarget = { steps = 5 }\n'


def _spec(grace: int | None = None) -> JobSpec:
    return JobSpec("big", ("python3", "t.py"), "m", 64, Target(TargetKind.STEPS, 1000), stop_grace_s=grace)


def _run(spec: JobSpec | None = None, stop_reason: str | None = "resize") -> Run:
    run = Run("big", Allocation.of("big", "A100", {"h": [0, 1]}), 4,
              {r: RankProc("h", f"big-r{r}", r, (r,), "exited") for r in (0, 1)}, 0.0, spec=spec or _spec())
    run.stop_reason = stop_reason
    return run


def test_the_spec_key_is_checked_kept_in_the_store_and_given_to_the_script(tmp_path: Path) -> None:
    assert parse_job_text(BASE + "stop_grace = 120\n", tmp_path / "j.toml").stop_grace_s == 120
    assert parse_job_text(BASE, tmp_path / "j.toml").stop_grace_s is None
    for bad in ("0", "3601", '"2m"'):
        with pytest.raises(ValueError, match=r"j.toml:6.*stop_grace"):
            parse_job_text(BASE + f"stop_grace = {bad}\n", tmp_path / "j.toml")
    spec = parse_job_text(BASE + "stop_grace = 120\n", tmp_path / "j.toml")
    assert spec_from_json(spec_to_json(spec)) == spec
    older = spec_to_json(spec).replace(', "stop_grace_s": 120', "")  # a store written before the key
    assert spec_from_json(older).stop_grace_s is None

    assert grace_s(spec, 30.0) == 120.0 and grace_s(_spec(), 30.0) == 30.0 and grace_s(None, 7.5) == 7.5
    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "A100", 2, 1.0)]))
    entries = {h.name: h for h in hosts.hosts}
    ranks = plan_launch("big", spec, Allocation.of("big", "A100", {"h": [0, 1]}), 1, entries, 29500,
                        stop_grace_s=120.0)
    assert {dict(r.env)["HEET_STOP_GRACE"] for r in ranks} == {"120"}
    profiling = plan_profile_launch("big", spec, entries["h"], 0, 2, stop_grace_s=7.5)
    assert dict(profiling.env)["HEET_STOP_GRACE"] == "7.5"


def test_a_stop_that_ended_in_sigkill_is_a_warning_naming_the_ranks(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    run = _run()
    note_killed_at_stop(store, run, 30.0, 5.0)
    assert not store.events("big"), "ranks that exited on their own: nothing to say"
    run.ranks[1].signal = signal.SIGKILL
    note_killed_at_stop(store, run, 30.0, 5.0)
    (event,) = store.events("big")
    assert event.kind == "warning" and f"big generation 4 {KILLED_AT_STOP} (30 s)" in event.message
    assert "rank 1," in event.message and "stop_grace" in event.message
    for quiet in (_run(stop_reason=None), _run(stop_reason="host h lost (gone)")):
        quiet.ranks[0].signal = signal.SIGKILL  # a crash, or a lost host: not a stop that ran out of time
        note_killed_at_stop(store, quiet, 30.0, 6.0)
    assert len(store.events("big")) == 1


def test_a_stop_a_rank_answered_with_an_error_is_a_warning(tmp_path: Path) -> None:
    """Seen: DataLoader workers killed by the stop signal made the main process exit 1 inside its
    step, before it saved; the stop read like a clean one, and steps were trained again unannounced."""
    store = Store(tmp_path / "state")
    run = _run()
    run.ranks[0].exit_code, run.ranks[1].exit_code = 143, 3  # stopped as asked; fenced by a newer copy
    note_killed_at_stop(store, run, 30.0, 5.0)
    assert not store.events("big")
    run.ranks[1].exit_code = 1
    note_killed_at_stop(store, run, 30.0, 5.0)
    (event,) = store.events("big")
    assert event.kind == "warning" and f"big generation 4 {FAILED_AT_STOP} (resize): rank 1 exit code 1" in event.message
    assert "DataLoader" in event.message


def test_a_script_exiting_0_at_a_stop_short_of_its_target_is_stopped_and_told(tmp_path: Path) -> None:
    """A SIGTERM handler calling sys.exit(0): the job was counted done at step 90 of 300 after a
    drain moved it, and nothing said that heet-tui had just stopped it."""
    from heet_tui.control.runtime import Outcome, judge

    store = Store(tmp_path / "state")
    run = _run()
    run.ranks[0].exit_code, run.ranks[1].exit_code = 0, 0
    run.progress = {"step": 90, "samples": 90 * 64}
    assert judge(run, run.spec) == (Outcome.STOPPED, "resize")
    note_killed_at_stop(store, run, 30.0, 5.0)
    (event,) = store.events("big")
    assert event.kind == "warning" and "big generation 4 exited 0 when it was stopped (resize), short of its " \
        "target: counted as stopped, not done" in event.message and "exit 143" in event.message
    run.progress = {"step": 1000, "samples": 1000 * 64}
    assert judge(run, run.spec)[0] is Outcome.DONE, "it reached its target as the stop came"
    note_killed_at_stop(store, run, 30.0, 6.0)
    assert len(store.events("big")) == 1
    run.progress, run.stop_reason = {"step": 90, "samples": 90 * 64}, None
    assert judge(run, run.spec)[0] is Outcome.DONE, "not stopped by heet-tui: exit 0 is the script's word"


def test_a_job_whose_save_and_step_take_most_of_its_grace_is_warned_once(tmp_path: Path) -> None:
    store, warned, run = Store(tmp_path / "state"), set(), _run()
    fits = {"step": 10, "samples": 640, "samples_per_s": 32.0, "checkpoint_s": 21.0}  # 21 s + a 2 s step
    warn_slow_stop(store, warned, run, fits, 30.0, 1.0)
    warn_slow_stop(store, warned, run, {"step": 10, "samples": 640, "samples_per_s": 32.0}, 10.0, 1.0)
    warn_slow_stop(store, warned, run, fits | {"checkpoint_s": "slow"}, 10.0, 1.0)
    assert not store.events("big"), "it fits in 80% of 30 s; no save time, or not a number: nothing to judge"
    warn_slow_stop(store, warned, run, fits | {"checkpoint_s": 23.0}, 30.0, 2.0)  # 23 + 2 > 24
    warn_slow_stop(store, warned, run, fits | {"checkpoint_s": 50.0}, 30.0, 3.0)
    (event,) = store.events("big")
    assert f"big {SLOW_STOP} (30 s)" in event.message and "took 23 s to save" in event.message
    assert "a step takes 2.0 s" in event.message and "stop_grace = 50" in event.message


def test_a_slow_saving_job_is_warned_then_killed_at_its_stop_and_a_longer_grace_lets_it_save(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    options = ControllerOptions(interval_s=0.3, auto_approve=True, profile=False,
                                execution=ExecOptions(stop_grace_s=2.0))
    slow = training_with(tmp_path, "slow_save", SLOW_SAVE.format(3.0)) + ["--checkpoint-every", "20"]

    def events(job_id: str) -> list[str]:
        return [e.message for e in store.events(job_id, limit=100) if e.kind == "warning"]

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            for name, extra in (("short", ""), ("long", "stop_grace = 20\n")):
                await ctl.post(SubmitJob(str(write_job(tmp_path, name, steps=100_000, max_gpus=1, command=slow,
                                                       extra=extra))))
            await wait_for(ctl, lambda _: min(store.job(n).job.steps_done for n in ("short", "long")) >= 25,
                           120, "both jobs to report after a checkpoint")
            assert any(SLOW_STOP in m and "(2 s)" in m and "took 3 s" in m for m in events("short")), events("short")
            assert not any(SLOW_STOP in m for m in events("long")), "3 s of 20 is no risk"
            for name in ("short", "long"):
                await ctl.post(CancelJob(name))
            await wait_for(ctl, lambda s: all(job(s, n).state is JobState.CANCELLED for n in ("short", "long")),
                           90, "both jobs to stop")
            await wait_for(ctl, lambda _: any(KILLED_AT_STOP in m for m in events("short")), 30, "the warning")
        finally:
            await ctl.stop()
        assert any(KILLED_AT_STOP in m and "(2 s)" in m and "; its last log line: " in m and "no grace helps" in m
                   for m in events("short")), events("short")
        assert not any(KILLED_AT_STOP in m for m in events("long"))
        stopped = store.job("long")
        saved = torch.load(stopped.checkpoint, weights_only=False)
        assert saved["step"] == stopped.job.steps_done > 25, "it had the time to save at the step it stopped"

    run_and_clean(scenario, tmp_path)
