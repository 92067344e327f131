"""The training metrics kept from progress lines (core/metrics.py)."""

from __future__ import annotations

import math

from heet_tui.core.metrics import MAX_METRICS, describe, metric, number, training_metrics


def test_the_numbers_besides_bookkeeping_are_kept_loss_first() -> None:
    progress = {"step": 10, "samples": 640, "samples_per_s": 99.0, "checkpoint": "c.pt", "checkpoint_s": 4.5,
                "world_size": 2, "accuracy": 0.91, "lr": 3e-4, "loss": 1.25, "epoch": 2}
    assert training_metrics(progress) == (("loss", 1.25), ("accuracy", 0.91), ("lr", 3e-4), ("epoch", 2.0))


def test_what_is_not_a_finite_number_or_has_an_odd_name_is_left_out() -> None:
    progress = {"loss": math.nan, "acc": math.inf, "done": True, "note": "warm", "nested": {"a": 1},
                "x" * 33: 1.0, "": 2.0, "ok": -0.5}
    assert training_metrics(progress) == (("ok", -0.5),)


def test_a_script_reporting_many_numbers_keeps_the_first_few() -> None:
    many = {f"m{i}": float(i) for i in range(40)} | {"loss": 0.1}
    kept = training_metrics(many)
    assert len(kept) == MAX_METRICS and kept[0] == ("loss", 0.1) and kept[1] == ("m0", 0.0)


def test_shown_to_four_significant_digits() -> None:
    metrics = (("loss", 0.000123456), ("tokens", 1234567.0))
    assert describe(metrics) == "loss 0.0001235  tokens 1.235e+06"
    assert metric(metrics, "tokens") == 1234567.0 and metric(metrics, "acc") is None
    assert number(None) == "-"
