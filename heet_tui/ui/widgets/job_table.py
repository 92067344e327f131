"""The job queue as a table: sortable by any column, filtered by text, cursor pinned to its job."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from rich.text import Text

from heet_tui.core.job import HOST_OUT, JobState
from heet_tui.core.metrics import metric, number
from heet_tui.core.natural_order import natural_key
from heet_tui.core.snapshot import JobStatus, Snapshot
from heet_tui.ui.format import ID_WIDTH, duration, job_colour, progress_bar, rate, short_id
from heet_tui.ui.widgets.keyed_table import Cells, KeyedTable

# Most telling first, so an 80-column terminal cuts the least: no Name column (an id is its job's
# name, suffixed "-2" when reused; the details show both), and Hosts and Restarts last. Loss is the
# latest the script reported (the details show its other metrics): what a sweep is compared by.
COLUMNS = (("id", "Job"), ("state", "State"), ("gpus", "GPUs"), ("progress", "Progress"), ("eta", "ETA"),
           ("tput", "Throughput"), ("loss", "Loss"), ("hosts", "Hosts"), ("restarts", "Restarts"))

_STATE_STYLE = {
    JobState.QUEUED: "dim", JobState.PROFILING: "cyan", JobState.RUNNING: "green", JobState.RESIZING: "yellow",
    JobState.DONE: "blue", JobState.FAILED: "bold red", JobState.CANCELLED: "magenta",
}
_STATE_ORDER = {s: i for i, s in enumerate((JobState.RESIZING, JobState.RUNNING, JobState.PROFILING,
                                             JobState.QUEUED, JobState.FAILED, JobState.CANCELLED, JobState.DONE))}

SORTS: dict[str, Callable[[JobStatus], Hashable]] = {
    "submitted": lambda j: (j.submitted_at, j.id),
    "state": lambda j: (_STATE_ORDER[j.state], j.submitted_at, j.id),
    "progress": lambda j: (-j.progress, j.id),
    "throughput": lambda j: (-j.throughput, j.id),
    "eta": lambda j: (j.eta_s is None, j.eta_s or 0.0, j.id),
    "gpus": lambda j: (-(j.allocation.num_gpus if j.allocation else 0), j.id),
    "restarts": lambda j: (-j.restarts, j.id),
    "name": lambda j: (natural_key(j.name), j.id),
    "loss": lambda j: (_loss(j) is None, _loss(j) or 0.0, j.id),  # lowest first, jobs without one last
}


SORT_COLUMN = {"submitted": "id", "state": "state", "progress": "progress", "throughput": "tput", "eta": "eta",
               "gpus": "gpus", "restarts": "restarts", "name": "id", "loss": "loss"}


def _loss(job: JobStatus) -> float | None:
    return metric(job.metrics, "loss")


def gpus_text(job: JobStatus) -> str:
    if job.allocation is None or job.allocation.num_gpus == 0:
        if job.state.terminal:
            return "-"
        return f"wants {job.min_gpus}-{job.max_gpus}" if job.max_gpus != job.min_gpus else f"wants {job.min_gpus}"
    return f"{job.allocation.num_gpus}x{job.allocation.gpu_type}"


def hosts_text(job: JobStatus, limit: int = 3) -> str:
    if job.allocation is None or not job.allocation.hosts:
        return "-"
    names = job.allocation.host_names
    shown = ",".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


OTHER_COLUMNS = 96  # what the columns after the id take, gaps included, at their usual widths
LONGEST_ID = 96  # a job name's limit (config/job_spec.py); a sweep's "-2" on top is cut


def state_text(job: JobStatus) -> Text:
    """A running job whose host is out reads so: its row said "running 39%" for a minute, the
    reason in the detail pane only."""
    if job.state is JobState.RUNNING and job.message.startswith(f"{HOST_OUT} "):
        return Text("host out", style="bold yellow")
    return Text(job.state.value, style=_STATE_STYLE[job.state])


def job_row(job: JobStatus, id_width: int = ID_WIDTH) -> Cells:
    return (Text(short_id(job.id, id_width), style=job_colour(job.id)), state_text(job),
            gpus_text(job), progress_bar(job.progress), duration(job.eta_s), rate(job.throughput),
            number(_loss(job)), hosts_text(job), str(job.restarts))


def matches(job: JobStatus, needle: str) -> bool:
    """Every word of the filter must appear in the job's id, name, model, state, type or hosts.

    The type is the one it runs on and those its spec allows: "t4" listed the jobs on T4 hosts
    only, and missed the queued ones that may run nowhere else (a job allowing any type names none).
    """
    if not needle:
        return True
    hay = " ".join((job.id, job.name, job.model, job.state.value, gpus_text(job), " ".join(job.gpu_types),
                    " ".join(job.allocation.host_names) if job.allocation else "")).lower()
    return all(word in hay for word in needle.lower().split())


class JobTable(KeyedTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, **kwargs)
        self.sort_name = "state"
        self.filter_text = ""
        self._sort_values: dict[str, Hashable] = {}

    def on_mount(self) -> None:
        self.order_by(self._sort_key)
        self.mark_column(SORT_COLUMN[self.sort_name])

    def _sort_key(self, job_id: str) -> Hashable:
        return self._sort_values[job_id]

    def cells_for(self, key: str, source: JobStatus) -> Cells:
        # as wide as the screen leaves: at 160 columns a sweep's ids were cut to 24 characters, and
        # sweep-lr0…seed1-steps150 stood for six learning rates (a resize redraws every row)
        return job_row(source, min(LONGEST_ID, max(ID_WIDTH, self.size.width - OTHER_COLUMNS)))

    def show(self, snap: Snapshot) -> None:
        sort = SORTS[self.sort_name]
        needle = self.filter_text
        rows = {job.id: job for job in snap.jobs if not needle or matches(job, needle)}
        self._sort_values = {job_id: sort(job) for job_id, job in rows.items()}  # bounded by the queue
        self.sync(rows)

    def set_sort(self, name: str, snap: Snapshot | None) -> None:
        self.sort_name = name
        if snap is not None:
            sort = SORTS[name]
            self._sort_values = {j.id: sort(j) for j in snap.jobs}
        self.order_by(self._sort_key)
        self.mark_column(SORT_COLUMN[name])

    def set_filter(self, text: str, snap: Snapshot | None) -> None:
        self.filter_text = text.strip()
        if snap is not None:
            self.show(snap)
