"""The connect benchmark runs end to end (its figures are reported, never asserted)."""

from __future__ import annotations

import json

from heet_tui.cli.main import main


def test_bench_connect_two_hosts(capsys, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    assert main(["bench", "connect", "--hosts", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["hosts"] == 2 and result["concurrent_ready"] == 2 and result["sequential_ready"] == 2
    assert result["speedup"] > 0 and result["per_host_median_s"] > 0


def test_bench_connect_rejects_bad_counts():
    assert main(["bench", "connect", "--hosts", "0"]) == 2
