"""The selected host in full: state and why, each GPU with its job, utilisation/memory sparklines."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Sparkline, Static

from heet_tui.core.snapshot import HostStatus
from heet_tui.ui.format import duration, job_colour
from heet_tui.ui.widgets.host_table import mean_utilisation, memory_fraction, staleness

HISTORY = 60


class HostHistory:
    """Bounded per-host utilisation and memory history, fed once per snapshot."""

    def __init__(self, length: int = HISTORY) -> None:
        self.length = length
        self.util: dict[str, deque[float]] = {}
        self.mem: dict[str, deque[float]] = {}
        self._last: tuple[HostStatus, ...] | None = None

    def record(self, hosts: tuple[HostStatus, ...]) -> None:
        """The same hosts again (the last snapshot redrawn as it ages, the controller gone) are no
        new samples: recorded, they flattened the sparklines into a line of the last value."""
        if hosts is self._last:
            return
        self._last = hosts
        for host in hosts:
            util, mem = mean_utilisation(host), memory_fraction(host)
            if util is not None:
                self.util.setdefault(host.name, deque(maxlen=self.length)).append(util)
            if mem is not None:
                self.mem.setdefault(host.name, deque(maxlen=self.length)).append(mem * 100)


class HostDetail(Vertical):
    DEFAULT_CSS = """
    HostDetail { height: 45%; max-height: 17; border-top: solid $primary; padding: 0 1; }
    HostDetail #host-info { height: 1fr; }
    HostDetail Sparkline { height: 1; margin-bottom: 0; }
    HostDetail Label { color: $text-muted; }
    """

    _shown: Text | None = None

    def on_mount(self) -> None:
        self._captions: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="host-info")
        yield Label("utilisation %", id="util-label")
        yield Sparkline([], id="util-spark", summary_function=max)
        yield Label("memory %", id="mem-label")
        yield Sparkline([], id="mem-spark", summary_function=max)

    _last: tuple | None = None

    def on_resize(self) -> None:
        """Laid out again for the new height: grown to 200x60, the pane kept its runs of GPUs
        and eleven blank lines until another host was selected."""
        if self._last is not None:
            self._shown = None
            self.call_after_refresh(self.show, *self._last)

    def show(self, host: HostStatus | None, now: float, history: HostHistory) -> None:
        self._last = (host, now, history)
        info = self.query_one("#host-info", Static)
        if host is None:
            info.update("No host selected.", layout=False)
            return
        text = Text()
        text.append(host.name, style="bold")
        text.append(f"  {host.state.value}")
        if host.message:
            text.append(f" — {host.message}", style="italic")
        stale = staleness(host, now)
        if stale is not None:
            text.append(f"\nstale since {duration(stale)}: figures below are the last known", style="bold red")
        text.append(f"\nrack {host.rack or '-'}  GPUs from {host.gpu_source or '-'}")
        if host.rtt_ms is not None:
            text.append(f"  rtt {host.rtt_ms:.1f} ms")
        if host.drained:
            text.append("  drained: no new work is placed here", style="yellow")
            if host.drained_why:
                text.append(f"\n{host.drained_why}", style="yellow")
        owners = dict(host.gpu_jobs)
        # lines as drawn: a long message wraps (counted as one, the GPU list and its count went unseen)
        shown = len(text.wrap(self.app.console, info.size.width)) if info.size.width else len(text.plain.split("\n"))
        room = info.size.height - shown
        if room <= 0 and info.size.height and host.gpus:  # no line left: said first, where it is seen
            text = Text.assemble((host.name, "bold"), (f"  ({len(host.gpus)} GPU(s) not shown: a taller terminal "
                                                        "shows them)", "dim"), text[len(host.name):])
        elif room <= 0 or len(host.gpus) <= room:
            for gpu in host.gpus:
                _gpu_line(text, gpu, owners.get(gpu.index))
        else:  # one line per run of GPUs alike: gpu5-7 and their jobs were cut off without a word
            runs = _runs(host.gpus, owners)
            for run in runs[:room - 1] if len(runs) > room else runs:
                _run_line(text, run, owners.get(run[0].index))
            if len(runs) > room:
                text.append(f"\n  … {sum(len(r) for r in runs[room - 1:])} more GPU(s): a taller terminal shows them",
                            style="dim")
        if text != self._shown:
            self._shown = text
            info.update(text, layout=False)
        for what, series in (("util", history.util.get(host.name)), ("mem", history.mem.get(host.name))):
            label = "utilisation %" if what == "util" else "memory %"
            # No samples is not the same as 0 %: say it instead of drawing a flat line.
            caption = f"{label}, last {HISTORY} snapshots" if series else f"{label}: not reported for this host"
            if self._captions.get(what) != caption:
                self._captions[what] = caption
                self.query_one(f"#{what}-label", Label).update(caption)
            spark = self.query_one(f"#{what}-spark", Sparkline)
            spark.display = bool(series)
            spark.data = list(series or ())


def _gpu_line(text: Text, gpu, job: str | None) -> None:
    text.append(f"\n  gpu{gpu.index} {gpu.gpu_type:<10} ")
    _holder(text, gpu, job)
    if gpu.utilization is not None:
        text.append(f"  util {gpu.utilization:.0f}%")
    if gpu.memory_used_mb is not None and gpu.memory_mb:
        text.append(f"  mem {gpu.memory_used_mb}/{gpu.memory_mb} MB")
    if gpu.source == "emulated":
        text.append("  (emulated)", style="dim")


def _holder(text: Text, gpu, job: str | None) -> None:
    """Who holds the GPU: a job, someone outside heet, or nobody."""
    if job is None and gpu.others:
        text.append(f"in use outside heet: {', '.join(gpu.others)}", style="yellow")
    else:
        text.append(job or "free", style=job_colour(job) if job else "dim")


def _runs(gpus, owners: dict) -> list[list]:
    """Consecutive GPUs of one type, owner (or outside user) and source."""
    def key(gpu) -> tuple:
        return gpu.gpu_type, owners.get(gpu.index), tuple(gpu.others), gpu.source

    out: list[list] = []
    for gpu in gpus:
        if out and key(out[-1][-1]) == key(gpu) and out[-1][-1].index + 1 == gpu.index:
            out[-1].append(gpu)
        else:
            out.append([gpu])
    return out


def _run_line(text: Text, run: list, job: str | None) -> None:
    first, last = run[0], run[-1]
    name = f"gpu{first.index}" if len(run) == 1 else f"gpu{first.index}-{last.index}"
    text.append(f"\n  {name:<8} {first.gpu_type:<10} ")
    _holder(text, first, job)
    utils = [g.utilization for g in run if g.utilization is not None]
    if utils:
        text.append(f"  util {sum(utils) / len(utils):.0f}%" + (" avg" if len(run) > 1 else ""))
    if first.source == "emulated":
        text.append("  (emulated)", style="dim")
