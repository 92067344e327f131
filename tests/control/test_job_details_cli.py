"""``heet-tui jobs NAME`` and ``heet-tui log NAME`` with no controller running (with one:
tests/control/test_job_log.py).

Seen: the table's one line per job was all the command line showed; why a job failed (its log
tail) was only in the TUI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobState


def _spec(root: Path, name: str, extra: str = "", model: str = "m") -> Path:
    path = root / f"{name}.toml"
    path.write_text(f'name = "{name}"\ncommand = ["python3", "train.py"]\nmodel = "{model}"\nbatch_size = 32\n'
                    f"target = {{ steps = 10 }}\n{extra}")
    return path


def test_jobs_name_shows_one_job_with_its_history_and_events(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(_spec(tmp_path, "cnn", 'gpu_types = ["T4"]\nmax_gpus = 2\n'))]) == 0
    store = Store(tmp_path / "state")
    store.set_state("cnn", JobState.RUNNING, 100.0)
    store.update_progress("cnn", 4, 128, "/ck/cnn/last.pt", metrics=(("loss", 0.25), ("acc", 0.875)))
    capsys.readouterr()
    assert main([*state, "jobs", "cnn"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "cnn  running  (as last recorded: no controller runs)"
    store.set_setting("checkpoint_hosts", json.dumps({"cnn": "gpu1"}))  # where its last run's rank 0 was
    store.record_allocation(Allocation.of("cnn", "T4", {"gpu1": [0, 1], "gpu2": [0, 1]}), 1, 100.0,
                            store.job("cnn").job.spec)
    store.add_observation("cnn", "T4", "1", 301.0, 99.0, "profiling")
    store.add_observation("cnn", "T4", "1", 311.0, 99.5, "profiling")
    store.add_observation("cnn", "T4", "22", 812.5, 101.0, "running")
    store.release_allocation("cnn", 101.5)
    tail = "rank 0 on gpu1 ended with exit code 1\nTraceback (most recent call last):\nValueError: loss is nan"
    store.add_event(101.0, "failed", tail, "cnn", "gpu1")
    store.set_state("cnn", JobState.FAILED, 102.0, "rank 0 on gpu1 ended with exit code 1 (3 attempts)")
    capsys.readouterr()
    assert main([*state, "jobs", "cnn"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "cnn  failed"
    assert "  command    python3 train.py" in lines and "  gpus       1-2, T4" in lines
    assert "  progress   4 steps, 128 samples (40% of the target); target 10 steps" in lines
    assert "queued" in out and "running" in out and "took" in out
    assert "  reported   loss 0.25  acc 0.875" in lines
    assert "  now        -   (last ran on 4xT4 on gpu1[0,1],gpu2[0,1], generation 1)" in lines, "where its logs are"
    assert any(line.startswith("  speed      812.5 samples/s on 2+2xT4 (reported ") for line in lines)
    assert "  checkpoint /ck/cnn/last.pt   (on gpu1)" in lines
    # what profiling measured too, not only what the running job last reported
    assert "  measured   1xT4 311/s (profiling), 2+2xT4 812/s (running)" in lines, lines
    failed = lines.index(next(line for line in lines if "failed     rank 0 on gpu1 ended" in line))
    assert lines[failed].endswith("[gpu1]") and lines[failed + 2].strip() == "ValueError: loss is nan", \
        "the failure's log tail, whole"
    assert main([*state, "jobs", "cnn", "--json"]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert detail["state"] == "failed" and detail["spec"]["gpu_types"] == ["T4"]
    assert detail["metrics"] == {"loss": 0.25, "acc": 0.875}
    assert main([*state, "submit", str(_spec(tmp_path, "quiet"))]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "250")  # wide: each row's message beside it, whatever width the run left
    assert main([*state, "jobs"]) == 0  # a LOSS column, since a job reported one
    table = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert table[0][:5] == ["ID", "STATE", "STEPS", "TARGET", "LOSS"]
    assert table[1][:6] == ["cnn", "failed", "4", "10", "steps", "0.25"] and table[2][5] == "-"
    assert [h["state"] for h in detail["history"]] == ["queued", "running", "failed"]
    assert [e["kind"] for e in detail["events"]] == ["submit", "warning", "failed"]
    assert detail["events"][1]["message"].startswith('at submit: "train.py" is not beside cnn.toml'), \
        "submit's warning is kept with the job (it went by with the terminal's scrollback, or a toast)"
    assert main([*state, "jobs", "nope"]) == 2
    assert 'no job "nope"' in capsys.readouterr().err
    store.update_progress("cnn", 78_724, 2_519_168, None)  # it printed 2.51917e+06 samples
    assert main([*state, "jobs", "cnn"]) == 0
    assert "  progress   78,724 steps, 2,519,168 samples" in capsys.readouterr().out
    store.set_state("quiet", JobState.RUNNING, 103.0, "running on 1xT4 on gpu1[0]")
    assert main([*state, "cancel", "quiet"]) == 0  # no controller: its processes are stopped when one runs
    capsys.readouterr()
    assert main([*state, "jobs"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("quiet "))
    assert "cancel requested; running" in row, "it showed only in --json"


def test_log_without_a_controller_shows_a_failures_recorded_tail_or_says_why_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "state")]
    assert main([*state, "submit", str(_spec(tmp_path, "a")), str(_spec(tmp_path, "b"))]) == 0
    store = Store(tmp_path / "state")
    store.add_event(5.0, "failed", "rank 0 ended with exit code 1\nline one\nValueError: nan", "a", "h")
    store.set_state("a", JobState.FAILED, 6.0, "failed")
    capsys.readouterr()
    assert main([*state, "log", "a"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["line one", "ValueError: nan"]
    assert main([*state, "log", "a", "-n", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["ValueError: nan"], "-n holds without a controller too"
    assert main([*state, "log", "b"]) == 1
    assert "no controller runs on" in capsys.readouterr().err
    assert main([*state, "log", "b", "-n", "0"]) == 2
    store.retry("a", 8.0, "retried")  # heet-tui retry
    store.set_state("a", JobState.RUNNING, 8.5, "running")
    store.set_state("a", JobState.DONE, 9.0, "target reached")  # and it went well
    capsys.readouterr()
    assert main([*state, "log", "a"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "failed before it was retried; it is done now" in header, "not read as the job's latest output"
