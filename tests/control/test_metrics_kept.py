"""A job's metrics keep the latest value of each one its progress lines reported.

Seen: a validation accuracy printed every N steps ("val_acc": 0.5 at step 3) vanished from the
Jobs screen, `heet-tui jobs NAME` and `--json` at the next line that carried only the loss.
"""

from __future__ import annotations

import sys
from pathlib import Path

from control_lab import (
    fast_retries,
    job,
    run_and_clean,
    started_controller,
    wait_for,
    write_job,
    write_local_hosts,
)

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.metrics import metric

# prints val_acc at step 3 only, then waits for the go-ahead file (the test has seen step 3's line
# recorded) before the lines that carry only the loss
VALIDATING = """
import json, os, sys, time
go = sys.argv[1]
for step in range(1, 11):
    line = {"step": step, "samples": step * 32, "samples_per_s": 100.0, "loss": 1.0 / step}
    if step == 3:
        line["val_acc"] = 0.5
    print("@heet-progress " + json.dumps(line), flush=True)
    while step == 3 and not os.path.exists(go):
        time.sleep(0.05)
"""


def test_a_validation_metric_reported_once_stays_beside_the_loss(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    go = tmp_path / "go"
    script = tmp_path / "validating.py"
    script.write_text(VALIDATING)

    async def scenario() -> None:
        async with started_controller(hosts, store, fast_retries(0)) as ctl:
            spec = write_job(tmp_path, "val", steps=10, max_gpus=1, command=[sys.executable, str(script), str(go)])
            await ctl.post(SubmitJob(str(spec)))
            await wait_for(ctl, lambda s: metric(job(s, "val").metrics, "val_acc") is not None, 60,
                           "val's step 3 recorded")
            go.touch()
            snap = await wait_for(ctl, lambda s: job(s, "val").state is JobState.DONE, 60, "val done")
            assert job(snap, "val").metrics == (("loss", 0.1), ("val_acc", 0.5)), "shown as the TUI reads them"

    run_and_clean(scenario, tmp_path)
    assert store.job("val").job.metrics == (("loss", 0.1), ("val_acc", 0.5))
