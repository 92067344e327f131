"""What a failed job's message quotes from its logs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from heet_tui.control.host_health import HostHealth
from heet_tui.control.job_log import fail_with_log_tail
from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.store import Store
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def test_a_blamed_rank_with_an_empty_log_quotes_rank_zeros_last_line(tmp_path: Path) -> None:
    """It ended "rank 1 on h2 ended with signal 9 (3 attempts); last log line:" and nothing: rank 1
    wrote no line, and rank 0's log held the traceback."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.set_state("j", JobState.RUNNING, 1.0)
    logs = {"j.r0": ["step 10", "RuntimeError: Connection reset by peer", ""], "j.r1": []}

    async def log_tail(host: str, agent_id: str, lines: int = 20) -> list[str]:
        return logs[agent_id]

    ranks = {0: RankProc("h1", "j.r0", 0, (0,), "exited", exit_code=1, ended_at=5.0),
             1: RankProc("h2", "j.r1", 1, (0,), "exited", signal=9, ended_at=4.0)}
    run = Run("j", Allocation.of("j", "T4", {"h1": [0], "h2": [0]}), 1, ranks, 1.0)
    executor = SimpleNamespace(cluster=SimpleNamespace(log_tail=log_tail), store=store, hosts=None, clock=lambda: 9.0,
                               log_tails={}, notify=lambda: None, health=HostHealth())
    asyncio.run(fail_with_log_tail(executor, run, "rank 1 on h2 ended with signal 9", 3))
    message = store.job("j").job.message
    assert message.endswith("; rank 1's log is empty; rank 0's last log line: RuntimeError: Connection reset by "
                            "peer"), message


def test_a_run_stalled_with_an_empty_log_is_asked_whether_its_output_is_buffered(tmp_path: Path) -> None:
    """A script whose stdout was a 64 KB buffered file ended "...; rank 0's log is empty" three
    times, and nothing said to flush."""
    from heet_tui.control.stalls import NONE_SEEN

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.set_state("j", JobState.RUNNING, 1.0)

    async def log_tail(host: str, agent_id: str, lines: int = 20) -> list[str]:
        return []

    ranks = {0: RankProc("h1", "j.r0", 0, (0,), "exited", signal=15, ended_at=5.0)}
    run = Run("j", Allocation.of("j", "T4", {"h1": [0]}), 1, ranks, 1.0)
    executor = SimpleNamespace(cluster=SimpleNamespace(log_tail=log_tail), store=store, hosts=None, clock=lambda: 9.0,
                               log_tails={}, notify=lambda: None, health=HostHealth())
    why = f"stalled: no progress report in its stall_timeout of 15s ({NONE_SEEN})"
    asyncio.run(fail_with_log_tail(executor, run, why, 3))
    assert store.job("j").job.message.endswith(
        "; rank 0's log is empty: is its output buffered? flush stdout after each line (print(..., flush=True)), "
        "docs/TRAINING.md"), store.job("j").job.message
