"""Profiling runs: parsing their output, their cost, and a real run of examples/profiling.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from heet_tui.profiling.runs import (
    ProfilingRequest,
    ProfilingRunError,
    cost_of,
    parse_run,
    profiling_command,
    total_gpu_seconds,
)
from heet_tui.profiling.tensor import JobKey

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "profiling.py"


def test_parse_takes_the_final_progress_line_and_ignores_noise() -> None:
    out = [
        "loading data...",
        '@heet-progress {"step": 10, "samples": 640, "samples_per_s": 100.0}',
        "@heet-progress {not json",
        b'@heet-progress {"step": 20, "samples": 1280, "samples_per_s": 120.5, "final": true}',
        "bye",
    ]
    result = parse_run(out)
    assert (result.samples_per_s, result.steps, result.samples, result.final) == (120.5, 20, 1280, True)


def test_parse_rejects_runs_without_a_measurement() -> None:
    with pytest.raises(ProfilingRunError, match="no @heet-progress"):
        parse_run(["Traceback (most recent call last):", "CUDA out of memory"])
    with pytest.raises(ProfilingRunError, match="0.0 samples/s"):
        parse_run(['@heet-progress {"step": 1, "samples": 0, "samples_per_s": 0}'])


def test_cost_is_gpus_times_wall_time() -> None:
    job = JobKey("cifar10", 512)
    a = cost_of(ProfilingRequest(job, "T4", (2, 2)), wall_s=30.0)
    b = cost_of(ProfilingRequest(job, "A100", (1,)), wall_s=12.5)
    assert a.placement == "22" and a.gpu_seconds == 120.0
    assert total_gpu_seconds([a, b]) == 132.5
    assert total_gpu_seconds([a, b], JobKey("bert", 12)) == 0.0
    with pytest.raises(ValueError):
        cost_of(ProfilingRequest(job, "T4", (1,)), wall_s=-1)


def test_example_really_trains_and_reports_throughput() -> None:
    """A real torch run on CPU, a few steps; its output parses into a measurement."""
    request = ProfilingRequest(JobKey("small-cnn", 16), "cpu", (1,), steps=4, seconds=20.0, warmup=1)
    argv = profiling_command(sys.executable, str(SCRIPT), request, model="mlp") + ["--report-every", "2"]
    env = {**os.environ, "HEET_EMULATED_SPEED": "2.0", "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len([line for line in lines if line.startswith("@heet-progress ")]) == 2  # steps 2 and 4
    result = parse_run(lines)
    assert result.final and result.steps == 4 and result.samples == 64
    assert result.samples_per_s > 0


def test_example_refuses_a_bad_emulated_speed() -> None:
    env = {**os.environ, "HEET_EMULATED_SPEED": "fast"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--steps", "1"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "HEET_EMULATED_SPEED must be a number" in proc.stderr
    assert "Traceback" not in proc.stderr
