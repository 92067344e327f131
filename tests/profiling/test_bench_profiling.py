"""``heet-tui bench profiling`` end to end on the tiny shipped subset, and its clean failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heet_tui.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "heet_tui" / "data" / "profiles"  # shipped subset


def test_bench_prints_the_issue_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "profiling", "--profiles", str(DATA), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for case in ("leave_one_job_out", "leave_one_model_out", "cold_type"):
        summary = out[case]
        assert {"median_ape", "p90_ape", "baseline_median_ape", "cells_predicted"} <= set(summary)
        assert summary["cells_predicted"] > 0
        assert 0 <= summary["median_ape"] <= summary["p90_ape"]
    assert out["meta"]["gpu_types"] == ["A100", "RTX2080Ti", "T4"]
    assert out["meta"]["fit_seconds_200x5x20"] > 0 and out["meta"]["fit_cpu_seconds_200x5x20"] > 0
    # the cold-type error is also given per new GPU type, and the pooled median lies among them
    by_type = out["cold_type"]["median_ape_by_unit"]
    assert set(by_type) == {"A100", "RTX2080Ti", "T4"}
    assert min(by_type.values()) <= out["cold_type"]["median_ape"] <= max(by_type.values())
    # with other batch sizes of the model known, a few runs predict the rest well
    assert out["leave_one_job_out"]["median_ape"] < out["leave_one_job_out"]["baseline_median_ape"]


def test_bench_reports_bad_input_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "profiling", "--profiles", str(tmp_path / "missing")]) == 2
    assert "profile directory not found" in capsys.readouterr().err
    bad = tmp_path / "m"
    bad.mkdir()
    (bad / "placements-aws.csv").write_text("placement,local_bsz,step_time,sync_time\n1,8,oops,0\n")
    assert main(["bench", "profiling", "--profiles", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert 'm/placements-aws.csv:2: column "step_time": not a number: "oops"' in err
    assert "Traceback" not in err
    assert main(["bench", "profiling", "--profiles", str(DATA), "--cases", "nope"]) == 2


def test_a_case_with_nothing_to_predict_says_why_in_valid_json(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """With one GPU type, cold_type printed "median_ape": NaN (not JSON: JSON.parse failed) and
    the table "nan nan ... MISSED"."""
    import shutil

    one_type = tmp_path / "profiles"
    for model in ("cifar10", "imagenet"):
        (one_type / model).mkdir(parents=True)
        for path in (DATA / model).glob("*"):
            if "-rtx" in path.name or "-dgx" in path.name:
                continue
            shutil.copy(path, one_type / model / path.name)
    assert main(["bench", "profiling", "--profiles", str(one_type), "--cases", "cold_type", "--json",
                 "--no-fit-timing"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text
    cold = json.loads(text)["cold_type"]
    assert json.loads(text)["meta"]["fit_seconds_200x5x20"] is None, "--no-fit-timing: not timed"
    assert cold["cells_predicted"] == 0 and cold["median_ape"] is None
    assert cold["skipped"] == f"needs at least two GPU types, {one_type} has 1"
    assert main(["bench", "profiling", "--profiles", str(one_type), "--cases", "cold_type", "--no-fit-timing"]) == 0
    assert "cold_type             skipped: needs at least two GPU types" in capsys.readouterr().out


def test_leave_one_model_out_on_one_model_says_it_needs_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On one model's profiles it said "nothing left to predict: a budget of 3 measures every cell";
    there was simply no other model to learn from."""
    import shutil

    one_model = tmp_path / "profiles"
    shutil.copytree(DATA / "cifar10", one_model / "cifar10")
    assert main(["bench", "profiling", "--profiles", str(one_model), "--cases", "leave_one_model_out", "--json",
                 "--no-fit-timing"]) == 0
    said = json.loads(capsys.readouterr().out)["leave_one_model_out"]
    assert said["skipped"] == f"needs at least two models, {one_model} has one (cifar10)", said
