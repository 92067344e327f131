"""The scheduler benchmark runs and prints the JSON shape the issue specifies (small size only)."""

from __future__ import annotations

import json

from heet_tui.cli.main import main


def test_bench_scheduler_json(capsys) -> None:
    assert main(["bench", "scheduler", "--gpus", "16,32", "--rounds", "1", "--synthetic", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for size in ("16", "32"):
        row = report[size]
        assert row["jobs"] == 2 * int(size) and row["p50_ms"] > 0 and row["p95_ms"] >= row["p50_ms"]
        assert 0 < row["gpus_used"] <= int(size)
    assert report["_meta"]["curves"] == "synthetic-amdahl"


def test_bench_scheduler_bad_sizes(capsys) -> None:
    assert main(["bench", "scheduler", "--gpus", "12,x"]) == 2
    assert "--gpus" in capsys.readouterr().err
