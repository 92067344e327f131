"""The lower bound on average JCT: exact where the answer is known, never above a real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted import ScriptedPolicy
from sim_support import WORKLOADS, cluster_of

from heet_tui.cli.main import main
from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.registry import make_policy
from heet_tui.sim.bound import BoundSettings, admission, lower_bound
from heet_tui.sim.bound_options import job_options, placements_for, work_iterations
from heet_tui.sim.engine import Simulation
from heet_tui.sim.workload import WorkloadJob

POLICIES = ("heet", "heet-lookahead", "goodput-mip", "gavel", "srtf", "fifo", "rigid-fifo")


def _three_long() -> list[WorkloadJob]:
    """Three identical hour-long jobs at once on one 4-GPU T4 host: restarts are a rounding error."""
    return [WorkloadJob(f"c{i}", 0.0, "cifar10", 4, 128) for i in range(3)]


def _crowd() -> list[WorkloadJob]:
    """Ten cifar10 jobs within five minutes on 4 T4 + 8 A100: nobody gets the A100s to itself."""
    return [WorkloadJob(f"c{i}", 30.0 * i, "cifar10", 4, (2048, 4096, 512)[i % 3]) for i in range(10)]


def test_a_lone_job_is_bounded_by_exactly_its_fastest_run(physics) -> None:
    # Batch 128 is cifar10's smallest validated batch (gain 1 in every epoch): the bound must be the
    # simulator's JCT on the fastest configuration to the second, admission round and restart included.
    cluster = cluster_of(("dgx-ext", 1))
    job = WorkloadJob("j", 10.0, "cifar10", 2, 128)
    best = job_options(job, physics.get("cifar10"), cluster, "packed")[0]
    alloc = Allocation.of("j", "A100", {"dgx-ext-0": list(range(best.count))})
    sim = Simulation(cluster, [job], physics, ScriptedPolicy(lambda now, jobs: {"j": alloc}))
    (record,) = sim.run()
    bound = lower_bound(cluster, physics, [job], BoundSettings(placements="packed"))
    assert record.jct_s == pytest.approx(60.0 + 50.0 + 1.0 / best.rate - 10.0, rel=1e-9)
    assert bound.avg_jct_s == pytest.approx(record.jct_s, rel=1e-6)
    assert bound.alone_avg_jct_s == pytest.approx(record.jct_s, rel=1e-6)


def _achieved(cluster, jobs: list[WorkloadJob], physics, policy: str) -> float:
    records = Simulation(cluster, jobs, physics, make_policy(policy), oracle=True).run()
    assert all(r.outcome == "done" for r in records)
    return sum(r.jct_s for r in records) / len(records)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", ["three_long", "crowd"])
def test_no_policy_beats_the_bound(policy: str, scenario: str, physics) -> None:
    cluster, jobs = {"three_long": (cluster_of(("aws", 1)), _three_long),
                     "crowd": (cluster_of(("aws", 1), ("dgx-ext", 1)), _crowd)}[scenario]
    assert lower_bound(cluster, physics, jobs()).avg_jct_s <= _achieved(cluster, jobs(), physics, policy)


def test_the_bound_is_nearly_reached_when_restarts_are_negligible(physics) -> None:
    # Sharing the host well (one job at a time on all four GPUs) is what an elastic policy does here;
    # the bound, which may time-share at no cost, must be within a few percent of it.
    cluster = cluster_of(("aws", 1))
    bound = lower_bound(cluster, physics, _three_long()).avg_jct_s
    assert _achieved(cluster, _three_long(), physics, "heet") <= 1.1 * bound


def test_the_bound_sees_contention_and_more_placements_only_lower_it(physics) -> None:
    cluster = cluster_of(("aws", 1), ("dgx-ext", 1))
    anywhere = lower_bound(cluster, physics, _crowd())
    packed = lower_bound(cluster, physics, _crowd(), BoundSettings(placements="packed"))
    assert anywhere.avg_jct_s > 1.3 * anywhere.alone_avg_jct_s  # ten jobs cannot all have the A100s
    assert anywhere.avg_jct_s <= packed.avg_jct_s * (1 + 1e-6)
    assert anywhere.jobs == 10 and not anywhere.unschedulable


def test_choosing_batches_only_lowers_the_bound_and_a_lone_job_gains_exactly_its_best_epochs(physics) -> None:
    cluster = cluster_of(("aws", 1), ("dgx-ext", 1))
    fixed = lower_bound(cluster, physics, _crowd())
    adaptive = lower_bound(cluster, physics, _crowd(), BoundSettings(batch="adaptive"))
    assert adaptive.avg_jct_s <= fixed.avg_jct_s * (1 + 1e-6)
    assert adaptive.alone_avg_jct_s < fixed.alone_avg_jct_s
    # Alone, choosing the batch per epoch is at least as fast as keeping any one validated batch.
    phys = physics.get("cifar10")
    (best, *_) = job_options(WorkloadJob("j", 0.0, "cifar10", 4, 2048), phys, cluster, "any", "adaptive")
    for b in phys.validation.batch_sizes:
        (fixed_best, *_) = job_options(WorkloadJob("j", 0.0, "cifar10", 4, b), phys, cluster, "any", "fixed")
        assert 1.0 / best.rate <= (1.0 / fixed_best.rate) * (1 + 1e-9)


def test_a_job_that_fits_nowhere_is_left_out_and_named(physics) -> None:
    jobs = [WorkloadJob("ok", 0.0, "cifar10", 2, 128), WorkloadJob("huge", 0.0, "cifar10", 64, 4096, 64, 64)]
    result = lower_bound(cluster_of(("aws", 1)), physics, jobs)
    assert result.unschedulable == ("huge",) and result.jobs == 1


def test_an_lp_beyond_the_limit_is_refused_before_it_is_built(physics) -> None:
    with pytest.raises(ValueError, match="variables"):
        lower_bound(cluster_of(("aws", 1)), physics, _crowd(), BoundSettings(max_variables=100))


def test_work_at_the_smallest_batch_is_the_target_progress(physics) -> None:
    phys = physics.get("cifar10")
    assert work_iterations(phys, 128) == pytest.approx(phys.target_progress, rel=1e-12)
    # A larger batch needs fewer iterations (each is worth its gain) but never fewer than progress / B.
    assert phys.target_progress * 128 / 4096 <= work_iterations(phys, 4096) < phys.target_progress


def test_placements_cover_every_host_count_and_the_measured_rows() -> None:
    assert placements_for(6, [4, 4], [], "packed") == [(4, 2)]
    assert placements_for(6, [4, 4], [], "any") == [(4, 2)]  # one host cannot hold 6
    assert placements_for(6, [4, 4], [(3, 3)], "any") == [(3, 3), (4, 2)]
    assert placements_for(3, [8, 8, 8], [(3,)], "any") == [(3,), (2, 1), (1, 1, 1)]
    assert placements_for(4, [8, 2], [], "any") == [(4,), (3, 1)]
    assert placements_for(4, [2, 2, 2], [(4,)], "any") == [(2, 2), (2, 1, 1)]  # no host holds 4
    assert placements_for(9, [4, 4], [], "any") == []


def test_admission_is_the_first_round_at_or_after_submission() -> None:
    assert [admission(t, 60.0) for t in (0.0, 59.0, 60.0, 61.0)] == [60.0, 60.0, 60.0, 120.0]


def test_cli_bound_prints_writes_json_and_compares_with_a_sim_run(tmp_path: Path, profile_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    workload = WORKLOADS / "saturn-first7.csv"
    sim_json, out = tmp_path / "sim.json", tmp_path / "bound.json"
    assert main(["sim", "--workload", str(workload), "--profiles", str(profile_dir), "--policy", "srtf,fifo",
                 "--oracle", "--json", str(sim_json)]) == 0
    capsys.readouterr()
    assert main(["sim", "bound", "--workload", str(workload), "--profiles", str(profile_dir),
                 "--against", str(sim_json), "--json", str(out)]) == 0
    assert "lower bound on average JCT" in capsys.readouterr().out
    entry = json.loads(out.read_text())["files"]["saturn-first7.csv"]
    assert entry["jobs"] == 7 and entry["bound_avg_jct_s"] >= entry["alone_avg_jct_s"] - 0.1
    assert set(entry["policy_over_bound"]) == {"srtf", "fifo"}
    assert all(ratio >= 1.0 for ratio in entry["policy_over_bound"].values())
    # a policy that finished fewer jobs averages fewer: it read 0.50x a lower bound
    short = json.loads(sim_json.read_text())
    short["fifo"]["files"]["saturn-first7.csv"]["jobs_done"] = 6
    sim_json.write_text(json.dumps(short))
    assert main(["sim", "bound", "--workload", str(workload), "--profiles", str(profile_dir),
                 "--against", str(sim_json), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "saturn-first7.csv: fifo not compared: finished 6 of the 7 jobs the bound covers" in printed
    entry = json.loads(out.read_text())["files"]["saturn-first7.csv"]
    assert entry["policy_over_bound"]["fifo"] is None and entry["policy_over_bound"]["srtf"] >= 1.0
    assert "finished 6 of the 7" in entry["policy_not_comparable"]["fifo"]
    # a run on another cluster or of other workloads is refused: it showed a policy at 0.42x the bound
    base = ["sim", "bound", "--profiles", str(profile_dir), "--against", str(sim_json)]
    assert main([*base, "--workload", str(workload), "--cluster-scale", "2"]) == 2
    assert "simulated on 64 GPUs, the bound is for 128" in capsys.readouterr().err
    assert main([*base, "--workload", str(WORKLOADS / "saturn-head.csv")]) == 2
    assert "results for saturn-first7.csv, not for saturn-head.csv" in capsys.readouterr().err
    assert main([*base, "--workload", str(workload), "--interval", "600"]) == 2
    assert "simulated with rounds of 60 s, the bound is for 600 s" in capsys.readouterr().err
    other = tmp_path / "other" / "saturn-first7.csv"  # the same name, another workload
    other.parent.mkdir()
    other.write_text("".join(workload.read_text().splitlines(keepends=True)[:4]))
    assert main([*base, "--workload", str(other)]) == 2
    assert "its saturn-first7.csv held 7 jobs, this one holds 3: not the same workload" in capsys.readouterr().err


def test_cli_bound_rejects_a_bad_comparison_file(tmp_path: Path, profile_dir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "sim.json"
    bad.write_text("{not json")
    code = main(["sim", "bound", "--workload", str(WORKLOADS / "saturn-first7.csv"), "--profiles",
                 str(profile_dir), "--against", str(bad)])
    assert code == 2
    assert f"{bad}:1: not JSON" in capsys.readouterr().err


def test_cli_bound_keeps_the_other_files_when_one_cannot_be_bounded(tmp_path: Path, profile_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    workloads, out = tmp_path / "workloads", tmp_path / "bound.json"
    workloads.mkdir()
    (workloads / "a-good.csv").write_text((WORKLOADS / "saturn-first7.csv").read_text())
    (workloads / "b-huge.csv").write_text("name,time,application,num_replicas,batch_size,min_gpus,max_gpus\n"
                                          "huge,0,cifar10,100,4096,100,100\n")
    assert main(["sim", "bound", "--workload", str(workloads), "--profiles", str(profile_dir),
                 "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "b-huge.csv: no job of the workload can run on this cluster" in captured.err
    files = json.loads(out.read_text())["files"]
    assert files["a-good.csv"]["jobs"] == 7 and files["a-good.csv"]["bound_avg_jct_s"] > 0
    assert files["b-huge.csv"] == {"error": "no job of the workload can run on this cluster", "jobs": 1}


def test_bound_is_a_verb_of_sim_only(capsys) -> None:
    """The command discovery registered every module's `register`, so `heet-tui bound` existed too."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bound", "--help"])
    assert exit_info.value.code == 2 and "invalid choice: 'bound'" in capsys.readouterr().err


INTERRUPTED_SOLVE = """
import ctypes, signal, sys
import heet_tui.sim.bound as bound

def solve_in_c(*args, **kwargs):  # as HiGHS does: C code that never looks for a signal
    libc = ctypes.CDLL(None)
    mask = ctypes.create_string_buffer(256)
    libc.sigemptyset(mask)
    libc.sigaddset(mask, signal.SIGINT)
    print("solving", flush=True)
    libc.sigsuspend(mask)  # waits, SIGINT held back, until another signal ends it

bound.lower_bound = solve_in_c
from heet_tui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_ends_a_bound_whose_solver_never_looks_for_signals(profile_dir: Path) -> None:
    """Ctrl-C waited minutes, for the LP solver to finish on its own."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED_SOLVE, "sim", "bound", "--workload",
                             str(WORKLOADS / "saturn-first7.csv"), "--profiles", str(profile_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "solving\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted while solving saturn-first7.csv: no results written" in err, err
