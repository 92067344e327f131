"""A job cancelled while a plan stops it for a move ends cancelled, and is not launched again.

Seen under fault injection: the stop for the move took its whole grace, the cancel came in
between, the stop ended as "resize" and the plan launched the job on its new host; the job read
"cancelled" while it trained on for minutes, holding two GPUs, and a second cancel said it was
"already cancelled". Only a controller restart fenced it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from control_lab import job, moved_by_a_drain, run_and_clean, wait_for, write_job

from heet_tui.control.store import Store
from heet_tui.core.intents import CancelJob
from heet_tui.core.job import JobState

SLOW_STOP = """
import json, os, signal, sys, time
ckpt = os.path.join(os.environ["HEET_CHECKPOINT_DIR"], "step.json")
step = json.load(open(ckpt))["step"] if os.path.exists(ckpt) else 0
def stop(*_):
    time.sleep(2.0)  # a slow save: the stop takes a while
    json.dump({"step": step}, open(ckpt, "w"))
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
while step < 100000:
    time.sleep(0.05)
    step += 1
    if step % 5 == 0:
        print("@heet-progress " + json.dumps({"step": step, "samples": step * 8, "samples_per_s": 160.0}), flush=True)
"""


def test_a_job_cancelled_while_stopping_for_a_move_is_not_launched_again(tmp_path: Path) -> None:
    script = tmp_path / "slow_stop.py"
    script.write_text(SLOW_STOP)
    spec = write_job(tmp_path, "m", steps=100000, max_gpus=1, command=[sys.executable, str(script)])
    store = Store(tmp_path / "state")

    async def scenario() -> None:
        async with moved_by_a_drain(tmp_path, store, spec, "m", 10, 60) as (ctl, _):
            await wait_for(ctl, lambda s: job(s, "m").state is JobState.RESIZING, 30, "m stopping for the move")
            await ctl.post(CancelJob("m"))
            await wait_for(ctl, lambda s: job(s, "m").state is JobState.CANCELLED, 60, "m cancelled")
            await asyncio.sleep(2.0)  # a launch after the stop would be under way by now
            assert "m" not in ctl.executor.runs, "no run of a cancelled job"
            launches = [e for e in store.events("m") if e.kind == "launch"]
            assert len(launches) == 1, [e.message for e in launches]
            steps = [step for rec in store.plans_with_status("applied", "failed", "applying") for step in
                     store.steps(rec.id) if step.change.job_id == "m"]
            assert steps and steps[-1].message == "skipped: the job was cancelled while stopping", \
                [s.message for s in steps]

    run_and_clean(scenario, tmp_path)
