"""The controller's throughput estimates: measurements first, then scaling laws and GPU-type
ratios borrowed from other jobs, then the profiling model (control/throughput.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from heet_tui.control.runtime import Run
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.profiling.configs import TYPICAL_SCALING_EXPONENT


def test_throughput_estimates_use_measurements_then_scale_and_borrow_type_ratios() -> None:
    book = ThroughputBook()
    book.add("a", "A100", (1,), 100.0)
    book.add("a", "T4", (1,), 25.0)
    book.add("b", "A100", (1,), 40.0)
    book.add("b", "A100", (2,), 70.0)
    book.add("b", "T4", (1,), float("nan"))  # ignored
    assert book.estimate("b", "A100", (2,)) == 70.0
    assert 70.0 < book.estimate("b", "A100", (4,)) < 140.0, "sub-linear beyond what was measured"
    assert book.estimate("b", "A100", (1, 1)) < book.estimate("b", "A100", (2,)) * 1.01
    assert book.estimate("b", "T4", (1,)) == pytest.approx(10.0), "A100:T4 = 4:1 as seen on job a"
    assert book.estimate("b", "V100", (1,)) == 0.0, "never measured anywhere: not offered (a side run measures it)"
    # without profiling runs nothing would: a rough guess, as fast as where it ran, so the plans use it
    # (a V100-only job of b's class sat queued beside an idle V100 for good)
    guessing = replace(book, guess_unrelated=True)
    assert guessing.estimate("b", "V100", (1,)) == pytest.approx(40.0)
    assert guessing.estimate_with_spread("b", "V100", (1,))[1] is None, "said to be a rough guess"


def test_a_type_guessed_from_several_measured_types_is_their_routes_mean_not_the_best() -> None:
    """Seen: measured at 9,165/s on an A100 and 5,307/s on a V100, a job's T4 guess was 15k/s
    (through an inflated T4:V100 ratio), above its own A100 figure; the plan held it for T4s."""
    book = ThroughputBook()
    for job_id, a100, v100, t4 in (("x", 100.0, 20.0, 50.0), ("y", 100.0, 20.0, 50.0)):
        book.add(job_id, "A100", (1,), a100)
        book.add(job_id, "V100", (1,), v100)  # measured too slow (a busy emulated host)
        book.add(job_id, "T4", (1,), t4)
    book.add("z", "A100", (1,), 9165.0)
    book.add("z", "V100", (1,), 5307.0)
    via_a100, via_v100 = 9165.0 * 0.5, 5307.0 * 2.5  # T4:A100 = 0.5, T4:V100 = 2.5 on x and y
    assert book.estimate("z", "T4", (1,)) == pytest.approx((via_a100 * via_v100) ** 0.5)
    assert book.estimate("z", "T4", (1,)) < 9165.0


def test_one_class_with_an_absurd_type_ratio_does_not_steer_every_other_jobs_guess() -> None:
    """Seen: one script reported 5e8/s on a T4 and 50/s on an A100 (under the 1e9 cap); five other
    classes ran at T4:A100 = 1:4; a new job measured at 3,779/s on an A100 was predicted at 32,866/s on
    two T4s, launched there beside idle A100s, and ran at 657/s."""
    book = ThroughputBook()
    for i in range(5):
        book.add(f"c{i}", "A100", (1,), 1000.0 * (i + 1))
        book.add(f"c{i}", "T4", (1,), 250.0 * (i + 1))
    book.add("skew", "A100", (1,), 50.0)
    book.add("skew", "T4", (1,), 5e8)
    book.add("new", "A100", (1,), 3779.0)
    assert book.type_ratio("T4", "A100") == pytest.approx(0.25)
    assert book.estimate("new", "T4", (1,)) == pytest.approx(3779.0 * 0.25)
    # with one other class only, the median is the mean of two: 1,581x a T4's speed on an A100
    two = ThroughputBook()
    two.add("mlp", "A100", (1,), 65014.0)
    two.add("mlp", "T4", (1,), 31302.0)
    two.add("skew", "A100", (1,), 50.0)
    two.add("skew", "T4", (1,), 5e8)
    assert two.type_ratio("T4", "A100") == pytest.approx(31302.0 / 65014.0)
    agree = ThroughputBook()  # two classes that roughly agree: their geometric mean, as before
    agree.add("x", "A100", (1,), 400.0)
    agree.add("x", "T4", (1,), 100.0)
    agree.add("y", "A100", (1,), 300.0)
    agree.add("y", "T4", (1,), 100.0)
    assert agree.type_ratio("A100", "T4") == pytest.approx((4.0 * 3.0) ** 0.5)


def test_a_job_that_scaled_badly_on_one_type_is_not_expected_to_scale_on_another() -> None:
    """Seen on the local config: a small MLP ran at 52k samples/s on one A100 and 5k on two (its
    step is all communication); the plan then moved it to 4 T4s, estimated at 4^0.85 x one T4's
    26k, then to 2, then to 1: three restarts of a lone job on an idle cluster."""
    book = ThroughputBook()
    book.add("mlp", "A100", (1,), 52_000.0)
    book.add("mlp", "T4", (1,), 26_000.0)
    book.add("mlp", "A100", (2,), 5_000.0)
    assert book.estimate("mlp", "T4", (4,)) < 5_000.0 < 26_000.0 == book.estimate("mlp", "T4", (1,))
    assert book.estimate("mlp", "T4", (2,)) < book.estimate("mlp", "T4", (1,))
    assert book.estimate("mlp", "A100", (4,)) < book.estimate("mlp", "A100", (2,))
    # A job that scaled well keeps scaling, and never better than linearly.
    book.add("cnn", "A100", (1,), 100.0)
    book.add("cnn", "A100", (4,), 380.0)
    book.add("cnn", "T4", (1,), 30.0)
    assert 0.9 * 4 * 30.0 < book.estimate("cnn", "T4", (4,)) <= 4 * 30.0
    book.add("cnn", "T4", (2,), 70.0)  # noise above linear on T4 does not make 8 GPUs super-linear
    assert book.estimate("cnn", "T4", (8,)) <= 70.0 * 4


def test_profiling_model_fills_unmeasured_cells_once_it_has_a_well_observed_job() -> None:
    from heet_tui.profiling.predictor import ThroughputPredictor

    book = ThroughputBook(predictor=ThroughputPredictor())
    book.register("a", "resnet", 32)
    book.register("b", "vgg", 32)
    book.add("b", "A100", (1,), 50.0)
    book.add("a", "T4", (1,), 30.0)
    assert not book.model_ready and book.estimate("b", "T4", (1,)) == pytest.approx(0.0), "too little to learn"
    guess, spread = book.estimate_with_spread("a", "T4", (2,))
    assert guess > 30.0 and spread is None, "the scaling law's guess: nothing says how far off"
    for gpu_type, speed in (("A100", 1.0), ("T4", 0.3)):
        for placement in ((1,), (2,), (4,), (2, 2), (8,), (4, 4)):
            book.add("a", gpu_type, placement, 100 * speed * sum(placement) ** 0.9)
    assert book.model_ready
    assert book.estimate("b", "A100", (1,)) == 50.0, "a measured cell is used as measured"
    t4 = book.estimate("b", "T4", (1,))
    assert 0.15 * 50 < t4 < 0.6 * 50, f"T4 is about 0.3x A100 as on job a, got {t4}"
    assert book.estimate_with_spread("b", "A100", (1,)) == (50.0, 0.0)
    value, spread = book.estimate_with_spread("b", "T4", (1,))
    assert value == t4 and 0.0 < spread < 1.0, f"the model's own spread, not a fixed figure: {spread}"
    assert book.estimate_with_spread("a", "T4", (4, 4))[1] == 0.0


def test_a_job_measured_at_one_count_scales_as_the_jobs_measured_here_did() -> None:
    """Seen on a 2-core host: every class was guessed at 1.8x on 2 GPUs though three had measured
    0.5-1.5x there; plans grew jobs that then ran slower than on one GPU."""
    book = ThroughputBook()
    book.add("new", "T4", (1,), 100.0)
    typical = book.estimate("new", "T4", (2,))
    assert typical == pytest.approx(100.0 * 2 ** TYPICAL_SCALING_EXPONENT), "nothing else measured: the typical law"
    for job_id, two in (("wide", 146.0), ("mlp", 46.0)):
        book.add(job_id, "A100", (1,), 100.0)
        book.add(job_id, "A100", (2,), two)
    exponents = [math.log(1.46, 2), math.log(0.46, 2), TYPICAL_SCALING_EXPONENT]  # the law counts as one class
    assert book.estimate("new", "T4", (2,)) == pytest.approx(100.0 * 2 ** (sum(exponents) / 3))
    assert book.estimate("new", "T4", (2,)) < 0.75 * typical
    book.add("new", "T4", (2,), 190.0)  # its own measurement wins
    assert book.estimate("new", "T4", (4,)) == pytest.approx(190.0 * 2 ** math.log(1.9, 2))


def test_an_eta_is_read_at_what_the_run_reports_not_at_a_faster_profiling_run_on_its_cell() -> None:
    """k1 showed 126/s beside an ETA read at 180/s: its 1xT4 profiling run was in the cell's mean."""
    from types import SimpleNamespace

    from heet_tui.control.snapshot_build import _steady

    book = ThroughputBook()
    book.add("k1", "T4", (1,), 234.0, "profiling", at=5.0)
    run = Run("k1", Allocation.of("k1", "T4", {"lt1": [0]}), 2, {}, 15.0)
    ctl = SimpleNamespace(book=book)
    assert _steady(ctl, run, 130.0) == 130.0, "no report of this run yet: the latest"
    book.add("k1", "T4", (1,), 120.0, "running", at=20.0)
    book.add("k1", "T4", (1,), 132.0, "running", at=30.0)
    assert _steady(ctl, run, 130.0) == pytest.approx(126.0)
    assert book.own("k1")[("T4", "1")] == pytest.approx(162.0), "the cell's own mean still has the profiling run"


def test_a_job_no_profiling_run_can_measure_gets_a_guess_on_types_it_never_ran_on() -> None:
    """A 4-GPU job measured on A100s waited for good beside 4 idle T4s ("the plan gives the free
    4xT4 GPUs to no job"): ratios came from one-GPU cells only, which multi-GPU jobs never have,
    and a job never profiled (min_gpus above 1) was left at 0 there for a side run that never comes."""
    book = ThroughputBook()
    book.register("wide", "tmlp", 256, min_gpus=4)
    book.add("wide", "A100", (4,), 2800.0)
    assert book.estimate("wide", "T4", (4,)) == pytest.approx(2800.0), "as fast as where it ran: a rough guess"
    assert book.estimate_with_spread("wide", "T4", (4,))[1] is None
    book.register("wide", "tmlp", 256, min_gpus=1)  # updated: a profiling run may measure it now
    assert book.estimate("wide", "T4", (4,)) == 0.0
    # a class that ran on both types at the same placement gives the ratio, one GPU or not
    book.add("other", "A100", (2, 2), 2000.0)
    book.add("other", "T4", (2, 2), 500.0)
    assert book.type_ratio("T4", "A100") == pytest.approx(0.25)
    assert book.estimate("wide", "T4", (4,)) == pytest.approx(700.0)
