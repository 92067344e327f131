"""The selected job: allocation, figures, its bounded log tail and its events."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from heet_tui.core.job import gpu_range
from heet_tui.core.metrics import describe
from heet_tui.core.snapshot import JobStatus
from heet_tui.ui.format import duration, rate

LOG_LINES = 200  # bounded: a chatty job cannot grow the UI's memory


class JobDetail(Static):
    DEFAULT_CSS = "JobDetail { height: 40%; max-height: 15; border-top: solid $primary; padding: 0 1; }"
    _job: JobStatus | None = None
    _drawn = False

    _empty = ""

    def show(self, job: JobStatus | None, empty: str = "No job selected.") -> None:
        """``empty`` is what to say when there is no job to show (why, and what to do)."""
        # Fixed height, so an update never needs a relayout; unchanged jobs are not redrawn at all.
        if self._drawn and job == self._job and (job is not None or empty == self._empty):
            return
        self._job, self._empty, self._drawn = job, empty, True
        if job is None:
            self.update(empty, layout=False)
            return
        text = Text()
        text.append(job.id if job.name == job.id else f"{job.id} {job.name}", style="bold")
        text.append(f"  {job.state.value}  model {job.model}  wants {gpu_range(job.min_gpus, job.max_gpus)}")
        text.append(f"\nallocation {job.allocation.describe() if job.allocation else '-'}")
        if job.allocation is not None and (ranks := job.allocation.ranks_on_hosts()):
            text.append(f" ({ranks})")  # what a rank's crash or log names
        ended = job.state.terminal  # an ended job is planned no more and pauses no more
        if edited := job.edit.describe():
            text.append(f"  your edit: {edited}", style="bold")
            text.append(" (kept if it is retried; d drops it)" if ended else " (plans keep to it; d drops it)")
        when = (f"took {duration(job.ended_at - job.submitted_at)}" if job.ended_at is not None
                else f"ETA {duration(job.eta_s)}")
        text.append(f"\nprogress {job.progress * 100:.1f}%  throughput {rate(job.throughput)}"
                    f"  {when}  restarts {job.restarts}"
                    + (f" (each pauses it ~{duration(job.restart_s)})" if job.restart_s is not None and not ended
                       else ""))
        if job.metrics:
            text.append(f"\nreported {describe(job.metrics)}")
        if job.message:
            text.append(f"\n{job.message}", style="italic")
        if job.events:
            # newest first: the pane is a few lines high on a small terminal, and the latest is what matters
            text.append("\nevents, newest first:", style="bold")
            for event in reversed(job.events[-6:]):
                text.append(f"\n  {event}")
        if job.log_tail:
            text.append("\nlog:", style="bold")
            for line in job.log_tail[-LOG_LINES:][-8:]:
                text.append(f"\n  {line}", style="dim")
        self.update(text, layout=False)
