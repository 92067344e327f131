"""``heet-tui sim generate`` end to end through the real CLI: workloads sampled from a trace."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_support import WORKLOADS

from heet_tui.cli.main import main
from heet_tui.sim.workload import load_workload


def test_generate_is_deterministic_and_loadable(tmp_path: Path) -> None:
    trace = WORKLOADS / "philly-trace-excerpt.csv"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for out in (a, b):
        assert main(["sim", "generate", "--trace", str(trace), "--jobs", "40", "--hours", "1000", "--seed", "7",
                     "--out", str(out)]) == 0
    assert a.read_text() == b.read_text()
    jobs = load_workload(a)
    assert len(jobs) == 40 and jobs[0].time == 0.0
    apps = {j.application for j in jobs}
    assert "cifar10" in apps and apps <= {"cifar10", "deepspeech2", "bert", "yolov3", "imagenet"}


def test_generate_asks_for_a_bigger_window(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "generate", "--trace", str(WORKLOADS / "philly-trace-excerpt.csv"), "--jobs", "5000",
                 "--hours", "1"])
    assert code == 2 and "fewer than --jobs 5000" in capsys.readouterr().err
    # The excerpt's densest 2 h holds 121 jobs and 200 arrive within 11.34 h at the closest.
    code = main(["sim", "generate", "--trace", str(WORKLOADS / "philly-trace-excerpt.csv"), "--jobs", "200",
                 "--hours", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "densest 2 h window of the trace holds 121 jobs" in err
    assert "ask for at most 121 jobs, or for at least 11.34 hours" in err
    assert main(["sim", "generate", "--trace", str(WORKLOADS / "philly-trace-excerpt.csv"), "--jobs", "200",
                 "--hours", "11.34"]) == 0


def test_generate_finds_a_short_busy_window_in_a_long_quiet_trace(tmp_path: Path) -> None:
    # One burst of six jobs in 10 minutes, between lone jobs 1000 hours apart: random window
    # starts almost never land on it.
    stamps = ["2017-10-01 00:00:00", *(f"2017-11-12 08:0{m}:00" for m in range(6)), "2017-12-23 16:00:00"]
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,num_gpus,gpu_time\n" + "".join(f"{s},2,{100 * (i + 1)}\n" for i, s in enumerate(stamps)))
    outputs = []
    for seed in range(4):
        out = tmp_path / f"w{seed}.csv"
        assert main(["sim", "generate", "--trace", str(trace), "--jobs", "5", "--hours", "1", "--seed", str(seed),
                     "--out", str(out)]) == 0
        jobs = load_workload(out)
        assert len(jobs) == 5 and jobs[-1].time <= 5 * 60
        outputs.append(out.read_text())
    assert len(set(outputs)) > 1  # the seed still picks which window and jobs


def test_generate_out_dash_says_standard_output_is_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    """It said "standard output carries the table" of a command that prints no table and writes
    to standard output by default."""
    code = main(["sim", "generate", "--trace", str(WORKLOADS / "philly-trace-excerpt.csv"), "--jobs", "5",
                 "--hours", "1000", "--out", "-"])
    err = capsys.readouterr().err
    assert code == 2 and "leave --out out to write to standard output, or name a file" in err, err
