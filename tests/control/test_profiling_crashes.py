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
