"""What policies are told: the oracle is the physics; predictions start from profiling runs."""

from __future__ import annotations

import math

import pytest
from sim_support import cluster_of

from heet_tui.scheduling.rigid_fifo import RigidFifoPolicy
from heet_tui.sim.engine import Simulation
from heet_tui.sim.estimates import HOST_PENALTY, OracleThroughput, PredictedThroughput
from heet_tui.sim.workload import WorkloadJob


def _job(physics, replicas: int = 4, batch: int = 512):
    sim = Simulation(cluster_of(("aws", 2), ("dgx-ext", 1)), [WorkloadJob("j", 0.0, "cifar10", replicas, batch)],
                     physics, RigidFifoPolicy(), manual_approval=True)
    sim.step()
    return sim.jobs["j"]


def test_oracle_reports_true_goodput(physics) -> None:
    job = _job(physics)
    view = OracleThroughput().view(job)
    for gpu_type, placement in (("T4", (4,)), ("A100", (2,)), ("T4", (2, 2))):
        truth = job.progress_rate(gpu_type, placement) * job.physics.init_batch_size
        assert view(gpu_type, placement) == pytest.approx(truth)
    assert view("T4", (4,) * 30) == 0.0


def test_predictions_start_from_noisy_profiling_runs_and_learn_what_runs(physics) -> None:
    job = _job(physics)
    source = PredictedThroughput(seed=1, host_sizes={"T4": 4, "A100": 8})
    source.admit(job)
    view = OracleThroughput().view(job)
    guess = source.view(job)
    for gpu_type in ("T4", "A100"):  # measured at submission: within the 5 % noise (4 sigma)
        assert abs(math.log(guess(gpu_type, (1,)) / view(gpu_type, (1,)))) < 0.2
    unmeasured = guess("T4", (4, 4))
    assert unmeasured > 0 and abs(math.log(unmeasured / view("T4", (4, 4)))) < math.log(2)
    source.observe(job, "T4", (4, 4))  # the job ran there: now known exactly
    assert source.view(job)("T4", (4, 4)) == pytest.approx(view("T4", (4, 4)))
    assert guess("T4", (4,) * 30) == 0.0


def test_a_types_scaling_comes_from_its_own_multi_gpu_run_when_there_is_one(physics) -> None:
    # Seen in the demo: yolov3 measured flat on 8 A100s (communication-bound) was predicted flat
    # on 8 T4s too, although it had run 2.8x faster on 4 T4s than on one; it sat on 4 T4s for
    # hours beside 20 idle ones.
    job = _job(physics)
    source = PredictedThroughput(seed=1, noise=0.0)
    for gpu_type, placement in (("T4", (1,)), ("A100", (1,)), ("A100", (8,)), ("T4", (4,))):
        source.observe(job, gpu_type, placement)
    measured = source.measured("j")
    t4_exponent = math.log(measured[("T4", (4,))] / measured[("T4", (1,))]) / math.log(4)
    a100_exponent = math.log(measured[("A100", (8,))] / measured[("A100", (1,))]) / math.log(8)
    assert t4_exponent > a100_exponent + 0.1, "the physics scales differently by type here"
    predicted = source.predict_raw(job, "T4", (4, 4))  # 8 GPUs: nearer in count to the A100 run
    assert predicted == pytest.approx(measured[("T4", (1,))] * 8 ** t4_exponent * HOST_PENALTY)


def test_predictions_depend_on_the_seed_only(physics) -> None:
    job = _job(physics)
    a, b, c = PredictedThroughput(seed=1), PredictedThroughput(seed=1), PredictedThroughput(seed=2)
    for s in (a, b, c):
        s.admit(job)
    assert a.view(job)("T4", (1,)) == b.view(job)("T4", (1,)) != c.view(job)("T4", (1,))


def test_unmeasured_placements_interpolate_between_measured_ones(physics) -> None:
    table = physics.get("cifar10").tables["RTX2080Ti"]
    two_by_two, two_by_four = table.lookup((2, 2), 64.0), table.lookup((4, 4), 64.0)
    three_three = table.lookup((3, 3), 64.0)  # not measured: between two hosts of 2 and of 4 GPUs
    assert three_three is not None and two_by_two is not None and two_by_four is not None
    assert min(two_by_two[0], two_by_four[0]) < three_three[0] < max(two_by_two[0], two_by_four[0])


def test_the_profiling_model_profiles_a_few_runs_then_learns_from_running(physics) -> None:
    from heet_tui.sim.profiled import PROFILING_BUDGET, ProfiledThroughput

    job = _job(physics)
    source = ProfiledThroughput(seed=0, host_sizes={"T4": 4, "A100": 8})
    source.admit(job)
    assert 0 < source.profiling_runs <= PROFILING_BUDGET
    truth = OracleThroughput().view(job)
    assert source.view(job)("T4", (4, 4)) > 0
    source.observe(job, "T4", (4, 4))
    assert source.view(job)("T4", (4, 4)) == pytest.approx(truth("T4", (4, 4)), rel=1e-6)
    assert source.view(job)("T4", (4,) * 30) == 0.0
    twin = _job(physics)  # same model and batch: nothing new to profile
    source.admit(twin)
    assert source.profiling_runs <= PROFILING_BUDGET


def test_a_placement_wider_than_any_measured_takes_a_batch_its_step_times_answer() -> None:
    """Seen on a lab cluster: 14 GPUs over 4 nodes took the largest local batch any curve
    measured (80, on one node) where the 3-node curves it is read from stop at 40: it ran at no
    speed and held its GPUs for 10 simulated hours until it was called unschedulable."""
    from heet_tui.profiling.sia_format import NodeProfile, PlacementRow, ScalabilityRow
    from heet_tui.sim.step_table import StepTable

    one_node = [PlacementRow((1,), b, 0.01 * b, 0.0) for b in (10, 40, 80)]
    three_nodes = [ScalabilityRow(3, r, b, 0.012 * b, 0.02) for r in (12, 16) for b in (10, 40)]
    table = StepTable(NodeProfile("rtx", "V100", tuple(one_node), tuple(three_nodes)))
    wide = (8, 3, 2, 1)
    assert table.max_local_bsz(wide) == 40.0
    assert table.lookup(wide, table.max_local_bsz(wide)) is not None
    assert table.max_local_bsz((1,)) == 80.0, "a measured placement keeps its own limit"


def test_jobs_of_one_model_and_batch_share_what_any_of_them_measured(physics) -> None:
    """As the controller keys them (the help says a sweep is profiled once): the demo measured each
    twin anew, and one twin's 51k/s on 16 A100s left the next predicted at 62k/s."""
    sim = Simulation(cluster_of(("aws", 2), ("dgx-ext", 1)),
                     [WorkloadJob("a", 0.0, "cifar10", 4, 512), WorkloadJob("b", 0.0, "cifar10", 4, 512),
                      WorkloadJob("c", 0.0, "cifar10", 4, 1024)], physics, RigidFifoPolicy(), manual_approval=True)
    sim.step()
    a, b, other = sim.jobs["a"], sim.jobs["b"], sim.jobs["c"]
    source = PredictedThroughput(seed=1, host_sizes={"T4": 4, "A100": 8})
    source.admit(a)
    profiled = source.measured("a")
    source.admit(b)
    assert source.measured("b") == profiled, "b is not profiled again: a's runs are its class's"
    source.observe(a, "T4", (4, 4))
    truth = OracleThroughput().view(b)("T4", (4, 4))
    assert source.view(b)("T4", (4, 4)) == pytest.approx(truth), "what a ran at is known for b"
    source.admit(other)
    assert ("T4", (4, 4)) not in source.measured("c"), "another batch is another class"
    source.forget("a")
    assert ("T4", (4, 4)) in source.measured("b"), "kept for the twins after a ends"
