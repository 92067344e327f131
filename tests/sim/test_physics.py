"""Physics against hand computation from the raw profile rows (no interpolation involved)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from scripted import ScriptedPolicy
from sim_support import NODE_TYPES, cluster_of

from heet_tui.core.allocation import Allocation
from heet_tui.scheduling.rigid_fifo import RigidFifoPolicy
from heet_tui.sim.engine import Simulation
from heet_tui.sim.physics import BatchConfig
from heet_tui.sim.workload import WorkloadJob


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _target_progress(model_dir: Path, epochs: int) -> float:
    return min(float(_rows(p)[epochs - 1]["progress"]) for p in model_dir.glob("validation-*.csv"))


@pytest.mark.parametrize("node", sorted(NODE_TYPES))
def test_one_job_alone_finishes_when_the_profile_predicts(node: str, profile_dir: Path, physics) -> None:
    # Batch 128 is the smallest validated batch, so the statistical gain is exactly 1; two GPUs
    # at 64 each is a measured row on every node type: the JCT is pure arithmetic on the files.
    step = next(float(r["step_time"]) for r in _rows(profile_dir / "cifar10" / f"placements-{node}.csv")
                if r["placement"] == "2" and r["local_bsz"] == "64")
    target = _target_progress(profile_dir / "cifar10", 100)
    sim = Simulation(cluster_of((node, 1)), [WorkloadJob("j", 0.0, "cifar10", 2, 128)], physics, RigidFifoPolicy())
    (record,) = sim.run()
    first_round, restart = 60.0, 50.0
    assert record.outcome == "done"
    assert record.finished_at == pytest.approx(first_round + restart + target * step, rel=1e-9)
    assert record.gpu_seconds == pytest.approx(2 * (record.finished_at - first_round), rel=1e-9)


def test_restart_pause_is_exact_and_longer_than_a_round(physics) -> None:
    # imagenet's restart costs 250 s: four 60 s rounds of nothing, then 50 s of training.
    alloc = Allocation.of("j", "A100", {"dgx-ext-0": [0, 1]})
    policy = ScriptedPolicy(lambda now, jobs: {"j": alloc})
    sim = Simulation(cluster_of(("dgx-ext", 1)), [WorkloadJob("j", 0.0, "imagenet", 2, 200)], physics, policy)
    sim.step()  # t=60: starts
    job = sim.jobs["j"]
    rate = job.progress_rate("A100", (2,))
    for _ in range(4):
        sim.step()
        assert job.progress == 0.0
    sim.step()
    assert job.progress == pytest.approx(rate * 50.0, rel=1e-12)
    assert job.restarts == 0


def test_resize_pauses_for_the_restart_then_runs_at_the_new_rate(physics) -> None:
    two = Allocation.of("j", "A100", {"dgx-ext-0": [0, 1]})
    four = Allocation.of("j", "A100", {"dgx-ext-0": [0, 1, 2, 3]})
    policy = ScriptedPolicy(lambda now, jobs: {"j": two if now < 3000 else four})
    sim = Simulation(cluster_of(("dgx-ext", 1)), [WorkloadJob("j", 0.0, "imagenet", 2, 200)], physics, policy,
                     interval=300.0)
    while sim.now < 3000:
        sim.step()
    job = sim.jobs["j"]
    before, epoch = job.progress, job.epoch
    sim.step()  # the 300 s after the resize: 250 s restart, 50 s at the four-GPU rate
    rate4 = job.progress_rate("A100", (4,), epoch)
    assert job.epoch == epoch  # stays inside one epoch, so one rate applies
    assert job.progress - before == pytest.approx(50.0 * rate4, rel=1e-9)
    assert job.restarts == 1


def test_efficiency_gain_matches_the_formula(profile_dir: Path, physics) -> None:
    table = physics.get("cifar10").validation
    row = _rows(profile_dir / "cifar10" / "validation-512.csv")[10]
    sqr, var = float(row["grad_sqr"]), float(row["grad_var"])
    scale = 512 / 128
    assert table.gain(512, 10) == pytest.approx((var + sqr) / (var / scale + sqr), rel=1e-12)
    assert table.gain(128, 10) == pytest.approx(1.0)
    # Between validated sizes the gradient statistics are interpolated linearly in batch size.
    lo = _rows(profile_dir / "cifar10" / "validation-128.csv")[10]
    w = (320 - 128) / (512 - 128)
    s = float(lo["grad_sqr"]) + w * (sqr - float(lo["grad_sqr"]))
    v = float(lo["grad_var"]) + w * (var - float(lo["grad_var"]))
    assert table.gain(320, 10) == pytest.approx((v + s) / (v / (320 / 128) + s), rel=1e-12)


def test_local_batch_beyond_the_measured_memory_limit_accumulates(physics) -> None:
    model = physics.get("cifar10")
    # 2048 over 2 GPUs is 1024 per GPU; the test profiles measure up to 513, so two micro-steps of 512.
    assert model.batch_config("T4", (2,), 2048) == BatchConfig(512, 1)
    assert model.batch_config("T4", (2,), 128) == BatchConfig(64, 0)


def test_a_batch_above_every_validated_one_trains_as_the_largest(physics) -> None:
    """1e6 over 4 GPUs ran as hundreds of micro-steps of 1 sample, each paying a whole step."""
    model = physics.get("cifar10")
    largest = int(model.validation.max_batch_size)
    assert model.batch_config("T4", (4,), 10**6) == model.batch_config("T4", (4,), largest)
    assert model.rate("T4", (4,), 10**6, 0) == model.rate("T4", (4,), largest, 0) > 0.0


def test_more_gpus_than_ever_measured_cannot_run(physics) -> None:
    model = physics.get("cifar10")
    assert model.rate("T4", (4,) * 20, 4096, 0) == 0.0
    assert model.rate("T4", (4, 4), 4096, 0) > 0.0
