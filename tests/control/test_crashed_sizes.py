"""Which sizes a job's launch crashes are blamed on, and when that blame is taken back
(control/crashed_sizes.py, control/crash_backoff.py)."""

from __future__ import annotations

from pathlib import Path

from heet_tui.control.runtime import RankProc, Run
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, Target, TargetKind


def test_a_launch_the_agent_refused_says_nothing_of_the_size() -> None:
    """A workdir or command missing on one host made the run "crash" before its first report at a
    new size, and plans then left that size out for good."""
    from heet_tui.control.crashed_sizes import new_size_that_crashed
    from heet_tui.control.runtime import LAUNCH_REFUSED

    book = ThroughputBook()
    book.add("j", "T4", (1,), 100.0)

    def run(reason: str | None) -> Run:
        ranks = {r: RankProc("h", f"j.r{r}", r, (r,), "exited", 127 if reason else 1, None, reason) for r in (0, 1)}
        return Run("j", Allocation.of("j", "T4", {"h": [0, 1]}), 4, ranks, 0.0)

    assert new_size_that_crashed(run(None), book) == ("T4", 2)
    assert new_size_that_crashed(run(f"{LAUNCH_REFUSED}: workdir /data/x does not exist"), book) is None
    # on a host where its class never ran (no torch there): the host is as likely the cause
    assert new_size_that_crashed(run(None), book, hosts_ran={"h"}) == ("T4", 2)
    assert new_size_that_crashed(run(None), book, hosts_ran={"other"}) is None


def test_a_crash_at_a_size_its_class_runs_at_blames_the_job_not_the_sizes_it_crashed_at_before() -> None:
    """A job whose command had a typo crashed at 2xA100 and at 2xV100 (both left out of plans, for
    its healthy twin too), then at 1xT4, where its class runs."""
    from heet_tui.control.crashed_sizes import crashed_where_its_class_runs, new_size_that_crashed

    book = ThroughputBook()
    book.register("twin", "imagenet", 32)
    book.register("typo", "imagenet", 32)
    book.add("twin", "T4", (1,), 100.0)  # the class's profiling run

    def run(gpu_type: str, n: int, reports: int = 0, host: str = "h") -> Run:
        ranks = {r: RankProc(host, f"typo.r{r}", r, (r,), "exited", 2, None, None) for r in range(n)}
        out = Run("typo", Allocation.of("typo", gpu_type, {host: list(range(n))}), 3, ranks, 0.0)
        out.reports = reports
        return out

    assert new_size_that_crashed(run("A100", 2), book) == ("A100", 2), "a new size: left out"
    assert not crashed_where_its_class_runs(run("A100", 2), book)
    assert crashed_where_its_class_runs(run("T4", 1), book) and new_size_that_crashed(run("T4", 1), book) is None
    assert not crashed_where_its_class_runs(run("T4", 1, reports=3), book), "it trained: a crash of another kind"
    assert not crashed_where_its_class_runs(run("T4", 1), book, hosts_ran={"other"}), "the host may be the cause"


def test_after_such_a_crash_its_twins_may_run_at_the_sizes_again(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from heet_tui.control.crash_backoff import after_crash
    from heet_tui.control.crashed_sizes import load_crashed_sizes
    from heet_tui.control.execution import ExecOptions
    from heet_tui.control.store import Store

    store = Store(tmp_path / "state")
    store.add_job(JobSpec(name="typo", command=("python3", "t.py"), model="imagenet", batch_size=32,
                          target=Target(TargetKind.STEPS, 100)), 0.0)
    book = ThroughputBook()
    book.register("typo", "imagenet", 32)
    book.add("twin", "T4", (1,), 100.0)
    book.register("twin", "imagenet", 32)
    executor = SimpleNamespace(store=store, clock=lambda: 10.0, book=book, crashed_sizes={},
                               health=SimpleNamespace(hosts_ran=lambda cls: None), backoff_until={},
                               opt=ExecOptions(max_retries=5, retry_backoff_s=1.0), _spawn=lambda coro: coro.close())

    def crash(gpu_type: str, n: int) -> None:
        ranks = {r: RankProc("h", f"typo.r{r}", r, (r,), "exited", 2, None, None) for r in range(n)}
        after_crash(executor, Run("typo", Allocation.of("typo", gpu_type, {"h": list(range(n))}), 3, ranks, 0.0),
                    "exit code 2")

    crash("A100", 2)
    crash("V100", 2)
    assert executor.crashed_sizes == {"typo": {("A100", 2), ("V100", 2)}} == load_crashed_sizes(store)
    crash("T4", 1)
    assert executor.crashed_sizes == {} == load_crashed_sizes(store)
    said = [e.message for e in store.events("typo") if e.kind == "crashed"]
    assert said[-1].endswith("the job itself is the cause, not 2xA100, 2xV100, which plans use again"), said
