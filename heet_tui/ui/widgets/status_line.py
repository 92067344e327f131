"""The one-line summary at the top of every screen: mode, clock, policy, plan, auto-approve; and,
while the controller is gone, a line under it that says so."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from heet_tui.core.host import HostState
from heet_tui.core.job import JobState
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.format import clock


@dataclass(frozen=True, slots=True)
class _Figures:
    ready: int
    gpus: int
    busy: int
    states: Counter
    outside: int = 0  # GPUs processes heet did not start compute on: plans keep off them

    @staticmethod
    def of(snap: Snapshot) -> _Figures:
        states = Counter(j.state for j in snap.jobs)
        states.update(dict(snap.hidden_ended))
        return _Figures(sum(1 for h in snap.hosts if h.state is HostState.READY), sum(len(h.gpus) for h in snap.hosts),
                        sum(len(h.gpu_jobs) for h in snap.hosts), states,
                        sum(1 for h in snap.hosts for g in h.gpus if g.others))


class StatusLine(Static):
    """Renders a snapshot's headline figures; knows nothing of the screen it sits on."""

    DEFAULT_CSS = """
    StatusLine { height: 1; background: $panel; color: $text; padding: 0 1; }
    StatusLine.-stopped { height: auto; }
    """

    def __init__(self, title: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._title = title
        self._read_only = False
        self._shown: Text | None = None
        self._snap: Snapshot | None = None

    def on_mount(self) -> None:
        self._read_only = bool(getattr(self.app, "read_only", False))
        self.show(getattr(self.app, "latest", None))

    def on_resize(self) -> None:
        self._shown = None
        self.show(self._snap)

    @property
    def _alarm(self) -> str:
        """What needs the user: red, or with NO_COLOR reversed (Textual's monochrome turned red
        into a grey on the header's grey, and "controller stopped" could not be seen)."""
        return "bold reverse" if getattr(self.app, "no_color", False) else "bold red"

    def show(self, snap: Snapshot | None) -> None:
        """The full line when it fits, else shorter ones: at 80 columns the full line lost the job
        counts, the plan and auto-approve off its end."""
        self._snap = snap
        stopped = str(getattr(self.app, "stopped", ""))
        silent = "" if stopped else str(getattr(self.app, "silent", ""))
        if not stopped and not silent and snap is not None and snap.store_error:
            silent = f"{snap.store_error}: the controller changes nothing; jobs are shown as last recorded"
        width = self.content_size.width
        figures = _Figures.of(snap) if snap is not None else None  # counted once, whatever the level
        text = self._line(snap, figures, 0, stopped or silent)
        for level in (1, 2, 3, 4, 5, 6, 7):
            if not width or text.cell_len <= width:
                break
            text = self._line(snap, figures, level, stopped or silent)
        if width and text.cell_len > width:  # it wrapped under the one-line header: "auto off" read "auto"
            # cut at the start: auto-approve's state and READ-ONLY, at the end, are what must stay
            text = Text("…") + text[text.cell_len - width + 1:]
        if stopped:  # wraps under the figures: every word of it matters, at any width
            text.append("\n")
            text.append(f"✗ {stopped}", style=self._alarm)
        elif silent:
            text.append("\n")
            text.append(f"⚠ {silent}", style="bold yellow")
        if text != self._shown:
            marked = bool(stopped or silent)
            relayout = self.has_class("-stopped") != marked
            self.set_class(marked, "-stopped")
            self._shown = text
            self.update(text, layout=relayout)  # one fixed line until then: not worth a relayout each time

    def _line(self, snap: Snapshot | None, f: _Figures | None, level: int, stopped: str = "") -> Text:
        """``level`` 0 says everything; 1 drops the mode (unless demo), the policy and the words;
        2 also the clock; 3 also the host count when every host is ready; 4 also the done and
        cancelled counts (the Jobs screen has them) and the plan's size; 5 the host count; 6 the
        GPU count and the screen's title; 7 the pending plan (its screen, 3, shows it): so
        auto-approve's state and READ-ONLY are not cut off. Once the controller has
        stopped there is no clock: a time that moves on would read as live."""
        text = Text()
        if level < 6:
            text.append(f" {self._title} ", style="bold reverse")
        if snap is None or f is None:
            if stopped:  # said on the line below
                return text
            if getattr(self.app, "backend", None) is None:
                text.append("  controller not available: the hosts file is all there is to see", style="yellow")
            else:
                text.append("  waiting for the first snapshot…", style="dim")
        else:
            ready, states = f.ready, f.states
            running = states[JobState.RUNNING] + states[JobState.RESIZING]
            queued = states[JobState.QUEUED]
            # a profiling job holds GPUs: counted as waiting, the header read "GPUs 1/2  0 run · 1 wait"
            prof = f" · {states[JobState.PROFILING]} profiling" if states[JobState.PROFILING] else ""
            done = states[JobState.DONE]
            if level == 0 or snap.mode == "demo":
                text.append(f"  {snap.mode}", style="bold magenta" if snap.mode == "demo" else "bold")
            pending = snap.plan is not None and snap.plan_id is not None and not snap.plan.is_empty
            if snap.mode == "demo" and pending and not snap.auto_approve:  # its clock waits: it looked frozen
                text.append(" ⏸ clock waits for the plan" if level < 3 else " ⏸ paused", style="yellow")
            if level < 2 and not stopped:
                text.append(f"  {clock(snap.now, snap.mode)}")
            if level == 0:
                text.append(f"  hosts {ready}/{len(snap.hosts)} ready  GPUs {f.busy}/{f.gpus} busy")
                if f.outside:
                    text.append(f" ({f.outside} outside heet)", style="yellow")
                text.append(f"  jobs {running} run{prof} · {queued} wait · {done} done")
            else:
                if level < 3 or (level < 5 and ready < len(snap.hosts)):
                    text.append(f"  hosts {ready}/{len(snap.hosts)}")
                if level < 6:
                    text.append(f"  GPUs {f.busy}/{f.gpus}")
                if f.outside:
                    text.append(f" +{f.outside} outside", style="yellow")
                text.append(f"  {running} run{prof if level < 3 else prof.replace('profiling', 'prof')} · {queued} wait"
                            + (f" · {done} done" if level < 4 else ""))
            if states[JobState.CANCELLED] and level < 4:  # not "done": they never reached their target
                text.append(f" · {states[JobState.CANCELLED]} cancelled", style="dim")
            if states[JobState.FAILED]:  # a failure is not "done": it needs the user
                text.append(" · ")
                text.append(f"{states[JobState.FAILED]} failed", style=self._alarm)
            if level == 0:
                text.append(f"  policy {snap.policy}")
            if pending and level < 7:
                what = "pending " if level == 0 else ""
                changes = f" {what}({len(snap.plan.changes)})" if level < 4 else ""
                text.append(f"  plan #{snap.plan_id}{changes}", style="bold yellow")
            text.append("  auto " + ("on" if snap.auto_approve else "off"),
                        style="green" if snap.auto_approve else "dim")
        if self._read_only or (snap is not None and snap.read_only):
            text.append("  ")
            text.append("READ-ONLY", style=self._alarm)
        return text
