"""A running job's ETA: read at its recent rate on its configuration, not at its latest report."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.snapshot_build import _steady
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation


def test_an_eta_is_read_at_the_jobs_recent_rate_on_its_configuration() -> None:
    """From each progress line alone, a job's ETA on a busy machine jumped between 54 s and 15
    minutes from one snapshot to the next."""
    book = ThroughputBook()
    run = Run("j", Allocation.of("j", "A100", {"h": [0, 1]}), 1, {0: RankProc("h", "j.r0", 0, (0,))}, 0.0)
    ctl = SimpleNamespace(book=book)
    assert _steady(ctl, run, 87_000.0) == 87_000.0, "nothing observed on it yet: the latest report"
    for rate in (18_000.0, 9_670.0, 12_000.0, 11_000.0):
        book.add("j", "A100", (2,), rate, "running", 1.0)
    book.add("j", "A100", (1,), 500.0, "running", 1.0)  # another configuration does not count
    assert _steady(ctl, run, 87_000.0) == pytest.approx((18_000 + 9_670 + 12_000 + 11_000) / 4)
