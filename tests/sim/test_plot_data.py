"""What the comparison figure draws (sim/plot.py), checked without matplotlib (an optional extra)."""

from __future__ import annotations

import pytest
from sim_support import cluster_of

from heet_tui.sim.physics import Physics
from heet_tui.sim.plot import gpus_in_use, jct_cdf
from heet_tui.sim.runner import RunSettings, default_factory, simulate
from heet_tui.sim.workload import WorkloadJob


def test_the_cdf_counts_every_job_and_the_gpus_drop_to_zero_across_an_idle_gap(physics: Physics) -> None:
    jobs = [WorkloadJob("early", 0.0, "cifar10", 1, 128), WorkloadJob("huge", 0.0, "cifar10", 9, 512),
            WorkloadJob("late", 50_000.0, "cifar10", 1, 128)]
    result = simulate(cluster_of(("aws", 1)), physics, jobs, default_factory("fifo"), RunSettings(),
                      policy_name="fifo")
    assert [r.jct_s is not None for r in result.records].count(True) == 2, "'huge' fits nowhere"
    jcts, done = jct_cdf(result)
    assert jcts == sorted(jcts) and len(jcts) == 2
    # two of the three jobs: divided by the finished jobs only, the curve ended at 1
    assert done == pytest.approx([1 / 3, 2 / 3])
    hours, gpus = gpus_in_use(result)
    before_late = [g for h, g in zip(hours, gpus, strict=True) if h < 50_000 / 3600.0]
    # drawn as steps, the last sample before the skipped rounds holds until the next: it reads 0
    # (drawn as a line, the gap was a ramp up to the late job's GPUs)
    assert before_late and before_late[-1] == 0 and max(before_late) > 0
