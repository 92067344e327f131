"""Progress lines that carry the prefix but cannot be read are reported, once per job and kind of problem, with why.

Before, they were dropped without a word: a script printing ``str()`` of a dict (single quotes,
not JSON) was profiled, marked "unmeasured" for printing no progress lines although it printed
one per step, and its author had to guess why.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from control_lab import job, run_and_clean, wait_for, write_job, write_local_hosts
from heet_agent.progress import parse_progress_line, progress_problem

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.intents import SubmitJob
from heet_tui.core.job import JobState


@pytest.mark.parametrize(("line", "why"), [
    ("@heet-progress {'step': 5, 'samples': 160, 'samples_per_s': 80.0}",
     "not JSON (single quotes: print json.dumps(d), not the dict itself)"),
    ('@heet-progress step=5 samples=160', "not JSON"),
    ('@heet-progress [5, 160, 80.0]', "not a JSON object"),
    ('@heet-progress {"step": 5, "loss": 1.2}', "missing samples, samples_per_s"),
    ('@heet-progress {"step": 5, "samples": 160, "samples_per_s": NaN}', "samples_per_s is not a finite number"),
    ('@heet-progress {"step": "5", "samples": 160, "samples_per_s": 8}', "step is not a finite number"),
    ('@heet-progress {"step": -1, "samples": 160, "samples_per_s": 8}',
     "step, samples and samples_per_s must not be negative"),
    ('@heet-progress {"step": 5, "samples": 160, "samples_per_s": 8, "checkpoint": 3}', "checkpoint is not a string"),
    # well-formed, and it became a measurement that moved every other job's cross-type guesses
    ('@heet-progress {"step": 5, "samples": 160, "samples_per_s": 1e15}',
     "samples_per_s 1e+15 is beyond any real job (at most 1e+09)"),
    # 400 KB of metrics, forwarded in every heartbeat, cut the host's link again and again
    ('@heet-progress {"step": 5, "samples": 160, "samples_per_s": 8, "pad": "%s"}' % ("\u00e9" * 200_000),
     "longer than 4096 bytes as JSON: report fewer or shorter metrics"),
])
def test_each_way_a_line_can_be_wrong_is_named(line: str, why: str) -> None:
    assert parse_progress_line(line) is None and progress_problem(line) == why


def test_a_step_going_back_within_one_run_is_not_progress() -> None:
    """Seen: "progress 5 steps, 3 samples" after step 229, without a word."""
    from heet_agent.log_follow import _whole_lines

    said: list[tuple[str, dict]] = []
    job = {"job_id": "g.r0.x", "generation": 1, "progress": {"step": 229, "samples": 7328, "samples_per_s": 80.0}}
    lines = b'@heet-progress {"step": 230, "samples": 7360, "samples_per_s": 80}\n' \
            b'@heet-progress {"step": 5, "samples": 3, "samples_per_s": 0}\n'
    latest = _whole_lines(job, lines, lambda kind, **fields: said.append((kind, fields)))
    assert latest is not None and latest["step"] == 230
    assert [(k, f["error"]) for k, f in said] == [("progress_error", "step went back from 230 to 5 within one run")]


def test_good_lines_and_other_output_have_no_problem() -> None:
    good = 'INFO:root:@heet-progress {"step": 5, "samples": 160, "samples_per_s": 8}'
    assert parse_progress_line(good) is not None and progress_problem(good) is None
    assert progress_problem("epoch 1: loss 0.3") is None and progress_problem(b"\xff\xfe") is None


def test_a_script_printing_python_dicts_is_told_why_once(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0), ("slow", "T4", 1, 0.5)]))
    store = Store(tmp_path / "state")
    script = tmp_path / "dict_print.py"
    script.write_text("import time\nfor step in range(1, 9):\n    time.sleep(0.1)\n"
                      "    print(f'@heet-progress {dict(step=step, samples=step * 32, samples_per_s=320.0)}')\n")
    options = ControllerOptions(interval_s=0.3, auto_approve=True)

    async def scenario() -> None:
        ctl = Controller(hosts, store, options)
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "dicts", steps=8, max_gpus=1,
                                                   command=[sys.executable, str(script)]))))
            await wait_for(ctl, lambda s: job(s, "dicts").state is JobState.DONE, 90, "the job to end")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    runs = [e for e in store.events(limit=500) if e.kind in ("profile", "launch")]
    assert len(runs) >= 2, "profiling and the job's own run each printed such lines"
    warnings = [e.message for e in store.events("dicts", limit=500) if "not a progress line" in e.message]
    assert warnings == ["dicts: a @heet-progress line is not a progress line (not JSON (single quotes: print "
                        "json.dumps(d), not the dict itself)), so it is not counted: @heet-progress {'step': 1, "
                        "'samples': 32, 'samples_per_s': 320.0} (docs/TRAINING.md, Progress lines)"]


def test_each_kind_of_bad_line_is_said_once_so_a_wild_step_is_not_hidden() -> None:
    """A single-quoted line used the job's one warning; a step of 1,000,000 then made every good
    line after it "go back", refused without a word, and the job sat at 7,142,857% of its target."""
    from heet_agent.log_follow import _whole_lines

    said: list[str] = []
    job = {"job_id": "w.r0.x", "generation": 1}
    lines = (b"@heet-progress {'step': 1, 'samples': 8, 'samples_per_s': 8.0}\n"
             b"@heet-progress {'step': 2, 'samples': 16, 'samples_per_s': 8.0}\n"
             b'@heet-progress {"step": 1000000, "samples": 8000000, "samples_per_s": 8}\n'
             + b"".join(b'@heet-progress {"step": %d, "samples": %d, "samples_per_s": 8}\n' % (s, 8 * s)
                        for s in range(9, 15)))
    _whole_lines(job, lines, lambda kind, **fields: said.append(fields["error"]))
    assert said == ["not JSON (single quotes: print json.dumps(d), not the dict itself)",
                    "step went back from 1000000 to 9 within one run"], "each kind once, the figures aside"


def test_the_controller_says_each_kind_of_bad_line_once_per_job(tmp_path: Path) -> None:
    hosts = load_hosts(write_local_hosts(tmp_path, [("fast", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    script = tmp_path / "wild.py"
    script.write_text("import json, time\n"
                      "def say(d): print('@heet-progress ' + json.dumps(d), flush=True); time.sleep(0.1)\n"
                      "print(\"@heet-progress {'step': 1}\", flush=True)\n"
                      "say(dict(step=1000000, samples=8000000, samples_per_s=8.0))\n"
                      "for step in range(9, 15):\n    say(dict(step=step, samples=8 * step, samples_per_s=8.0))\n"
                      "print(\"@heet-progress {'step': 2}\", flush=True)\n"
                      "say(dict(step=3, samples=24, samples_per_s=8.0))\n")

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.3, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await ctl.post(SubmitJob(str(write_job(tmp_path, "wild", steps=14, max_gpus=1,
                                                   command=[sys.executable, str(script)]))))
            await wait_for(ctl, lambda s: job(s, "wild").state in (JobState.DONE, JobState.FAILED), 90, "the end")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    warnings = [e.message for e in store.events("wild", limit=500) if "not a progress line" in e.message]
    assert len(warnings) == 2, warnings
    assert "(not JSON (single quotes" in warnings[0] and "(step went back from 1000000 to 9 within" in warnings[1]
