"""A script that crashes during profiling: each profiling round is one attempt, however many
GPU types it ran on. Before, both runs of a round counted, so the job failed after two rounds
of its three and said "(4 attempts)"."""

from __future__ import annotations

from pathlib import Path

from control_lab import job, run_and_clean, wait_for, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.execution import ExecOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


def test_a_profiling_round_that_crashes_on_two_types_is_one_attempt(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.5)]))
    store = Store(tmp_path / "state")
    (tmp_path / "fail.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(7)\n")
    spec = tmp_path / "failer.toml"
    spec.write_text(f'name = "failer"\ncommand = ["python3", "{tmp_path / "fail.py"}"]\nmodel = "cifar10"\n'
                    'batch_size = 8\ntarget = { steps = 10 }\n')
    options = ControllerOptions(interval_s=0.2, execution=ExecOptions(retry_backoff_s=0.5))

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            snap = await wait_for(ctl, lambda s: job(s, "failer").state.terminal, 90, "failer to end")
        finally:
            await ctl.stop()
        failed = job(snap, "failer")
        assert failed.state is JobState.FAILED and "(3 attempts)" in failed.message, failed.message
        assert "boom" in failed.message
        rounds = [e for e in store.events(job_id="failer", limit=50) if e.kind == "profile"]
        assert len(rounds) == 3, [e.message for e in rounds]

    run_and_clean(scenario, tmp_path)


def test_a_job_that_needs_two_gpus_is_not_profiled_on_one(tmp_path: Path) -> None:
    """Profiling runs are single-GPU: a job with min_gpus = 2 (its model does not fit on one GPU)
    crashed in every profiling round, each round counted as an attempt, and it failed without
    ever running at the size it asked for."""
    from control_lab import training_with, write_job

    hosts = load_hosts(write_local_hosts(tmp_path, [("box", "A100", 2, 1.0)]))
    store = Store(tmp_path / "state")
    command = training_with(tmp_path, "needs_two", "if os.environ.get('WORLD_SIZE') != '2':\n"
                            "    print('out of memory on one GPU', file=sys.stderr); sys.exit(3)")
    spec = write_job(tmp_path, "big", steps=40, max_gpus=2, command=command)
    spec.write_text(spec.read_text().replace("min_gpus = 1", "min_gpus = 2"))
    options = ControllerOptions(interval_s=0.2, auto_approve=True, execution=ExecOptions(retry_backoff_s=0.2))

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: job(s, "big").state.terminal, 120, "big to end")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    rec = store.job("big")
    assert rec.job.state is JobState.DONE, (rec.job.state, rec.job.message)
    assert not [e for e in store.events("big", limit=100) if e.kind == "profile" and "profiling on" in e.message]
