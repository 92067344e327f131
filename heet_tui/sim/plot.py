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


def write_plot(results: Sequence[RunResult], path: Path | str, total_gpus: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib, which is not installed: "
                              "pip install 'heet-tui[plot]' (the `plot` extra)") from None
    fig, (cdf, use) = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in results:
        jcts = sorted(rec.jct_s / 3600.0 for rec in r.records if rec.jct_s is not None)
        if jcts:
            ys = [(i + 1) / len(jcts) for i in range(len(jcts))]
            cdf.step(jcts, ys, where="post", label=f"{r.policy} ({Path(r.workload).name})")
        use.plot([t / 3600.0 for t in r.stats.times], r.stats.gpus_in_use, label=r.policy, linewidth=0.8)
    cdf.set_xscale("log")
    cdf.set_xlabel("JCT (hours)")
    cdf.set_ylabel("fraction of jobs")
    cdf.set_title("JCT CDF")
    cdf.legend(fontsize="small")
    use.axhline(total_gpus, color="grey", linestyle=":", linewidth=0.8)
    use.set_xlabel("time (hours)")
    use.set_ylabel("GPUs in use")
    use.set_title("GPUs in use")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
