"""A job's throughput over GPU type x configuration: measured cells set apart from predicted ones.

Measured cells are bold with a ``●``; predicted cells are plain with ``~`` and their relative
uncertainty (``±?`` for a scaling-law guess no model backs yet), so nobody mistakes a
completion-model guess for a measurement.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from heet_tui.core.plan import spread
from heet_tui.core.snapshot import JobProfile
from heet_tui.ui.format import rate

_SHADES = ("#2b2d42", "#3d4a7a", "#3f6fa8", "#3e95b8", "#4bb89b", "#8fcf6a", "#e3d45a", "#f39c4a")


def _config_order(config: str) -> tuple[int, int, str]:
    digits = [int(c) for c in config.split("-")] if "-" in config else [int(c) for c in config if c.isdigit()]
    return (sum(digits), len(digits), config)


def _figure(samples_per_s: float) -> str:
    """At most four digits and no unit (the title gives it): with "/s" a cell was too wide for an
    80-column terminal, and Rich cut the figures to "●9240…"."""
    if samples_per_s >= 10_000:
        return f"{samples_per_s / 1000:.0f}k"
    if samples_per_s >= 10:
        return f"{samples_per_s:.0f}"
    return f"{samples_per_s:.1f}"


def heatmap(profile: JobProfile) -> Table:
    types = sorted({c.gpu_type for c in profile.cells})
    configs = sorted({c.config for c in profile.cells}, key=_config_order)
    best = max((c.samples_per_s for c in profile.cells), default=0.0) or 1.0
    grid = {(c.gpu_type, c.config): c for c in profile.cells}
    table = Table(title=f"{profile.job_id}: samples/s by GPU type x placement", expand=False, padding=(0, 1))
    # a type's name is never cut (a predicted cell wraps its ±spread onto a second line instead)
    table.add_column("type", style="bold", no_wrap=True, min_width=max(map(len, types), default=4))
    for config in configs:
        table.add_column(config, justify="right")
    for gpu_type in types:
        row: list[Text | str] = [gpu_type]
        for config in configs:
            cell = grid.get((gpu_type, config))
            if cell is None:
                row.append(Text("·", style="dim"))
                continue
            shade = _SHADES[min(len(_SHADES) - 1, int(cell.samples_per_s / best * len(_SHADES)))]
            used = " underline" if (gpu_type, config) in (profile.runs_on, profile.planned_on) else ""
            if cell.measured:
                row.append(Text(f"●{_figure(cell.samples_per_s)}", style=f"bold white{used} on {shade}"))
            else:
                row.append(Text(f"~{_figure(cell.samples_per_s)} {spread(cell.uncertainty)}",
                                style=f"italic{used} on {shade}"))
        table.add_row(*row)
    # the placement headers were explained nowhere ("what is 4444?")
    table.caption = ("● measured   ~ predicted ±uncertainty (±? a rough guess)   · unknown\n"
                     "placement: GPUs on each host (4: one host; 44: 4 on each of 2 hosts)" + _where(profile))
    return table


def _where(profile: JobProfile) -> str:
    """Which cells the job runs on and the pending plan would give it (underlined): the figures a
    plan's speeds come from."""
    said = []
    if profile.runs_on:
        said.append("runs now on {} {}".format(*profile.runs_on))
    if profile.planned_on and profile.planned_on != profile.runs_on:
        said.append("the pending plan puts it on {} {}".format(*profile.planned_on))
    return ("\nunderlined: " + "; ".join(said)) if said else ""


def scaling_curves(profile: JobProfile, width: int = 40) -> Text:
    """Throughput against GPU count per type, one bar per count: the best placement for that count."""
    best: dict[str, dict[int, float]] = {}
    for cell in profile.cells:
        count = _config_order(cell.config)[0]
        per_type = best.setdefault(cell.gpu_type, {})
        per_type[count] = max(per_type.get(count, 0.0), cell.samples_per_s)
    top = max((v for t in best.values() for v in t.values()), default=0.0) or 1.0
    text = Text("scaling (best placement per GPU count)\n", style="bold")
    for gpu_type in sorted(best):
        text.append(f"{gpu_type}\n", style="bold")
        for count in sorted(best[gpu_type]):
            value = best[gpu_type][count]
            text.append(f"  {count:>3} GPU{'s' if count != 1 else ' '} ")  # "1 GPUs" read as a typo
            text.append("█" * max(1, int(value / top * width)), style="cyan")
            text.append(f" {rate(value)}\n")
    return text
