"""The comparison figure: JCT CDF per policy and GPUs in use over time (matplotlib, optional).

matplotlib is an optional extra (``pip install heet-tui[plot]``): the simulator itself must
install and run on a login node without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from heet_tui.sim.runner import RunResult


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def jct_cdf(result: RunResult) -> tuple[list[float], list[float]]:
    """JCTs in hours and the fraction of *all* the workload's jobs done by each: a policy that
    left jobs unfinished stops short of 1 (divided by the finished jobs, its curve reached 1
    like a policy that finished them all)."""
    jcts = sorted(rec.jct_s / 3600.0 for rec in result.records if rec.jct_s is not None)
    return jcts, [(i + 1) / len(result.records) for i in range(len(jcts))]


def gpus_in_use(result: RunResult) -> tuple[list[float], list[int]]:
    """Hours and GPUs in use, each sample holding until the next (drawn as steps): idle rounds the
    simulator skips left hours-long gaps that a line drew as a ramp of GPUs nobody held."""
    return [t / 3600.0 for t in result.stats.times], list(result.stats.gpus_in_use)


def write_plot(results: Sequence[RunResult], path: Path | str, total_gpus: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib, which is not installed: "
                              "pip install 'heet-tui[plot]' (the `plot` extra)") from None
    fig, (cdf, use) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in results:
        jcts, done = jct_cdf(r)
        if jcts:
            cdf.step(jcts, done, where="post",
                     label=f"{r.policy} ({Path(r.workload).name}, {len(jcts)}/{len(r.records)} done)")
        hours, gpus = gpus_in_use(r)
        use.step(hours, gpus, where="post", label=r.policy, linewidth=0.8)
    cdf.set_xscale("log")
    cdf.set_xlabel("JCT (hours)")
    cdf.set_ylabel("fraction of the workload's jobs done")
    cdf.set_title("JCT CDF")
    cdf.legend(fontsize="small")
    use.axhline(total_gpus, color="grey", linestyle=":", linewidth=0.8)
    use.set_xlabel("time (hours)")
    use.set_ylabel("GPUs in use")
    use.yaxis.set_major_locator(MaxNLocator(integer=True))
    use.set_title("GPUs in use")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
