"""Jobs screen: queue and running jobs; sort, `/` filter, detail, `l` the job's log, cancel with
confirmation, `r` retry a failed or cancelled job, `u` give a job its changed spec, `d` drop what
the user fixed for a job on the Plan screen."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from heet_tui.core.intents import CancelJob, DropEdit, RetryJob
from heet_tui.core.job import RETRYABLE, JobState
from heet_tui.core.snapshot import JobStatus, Snapshot
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.job_log import JobLogDialog
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.widgets.filter_box import FILTER_BINDINGS, FilterBox, FilterKeys
from heet_tui.ui.widgets.job_detail import JobDetail
from heet_tui.ui.widgets.job_table import SORTS, JobTable
from heet_tui.ui.widgets.keyed_table import KeyedTable
from heet_tui.ui.widgets.screen_footer import ScreenFooter
from heet_tui.ui.widgets.status_line import StatusLine

SORT_CYCLE = tuple(SORTS)


class JobsScreen(FilterKeys, SnapshotScreen):
    FOOTER_OPTIONAL = ("cycle_sort", "filter")  # in the help; left out where every key would not fit
    BINDINGS = [
        Binding("n", "submit_job", "Submit"),
        Binding("s", "cycle_sort", "Sort"),
        *FILTER_BINDINGS,
        Binding("x", "cancel_job", "Cancel"),
        Binding("r", "retry_job", "Retry"),
        Binding("u", "update_job", "Update"),
        Binding("l", "show_log", "Log"),
        Binding("d", "drop_edit", "Drop edit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._jobs: dict[str, JobStatus] = {}

    def compose(self) -> ComposeResult:
        yield StatusLine("Jobs")
        yield JobTable(id="jobs")
        yield JobDetail()
        yield FilterBox("filter: words matched against id, name, model, state, type, hosts")
        yield ScreenFooter()

    def render_snapshot(self, snap: Snapshot) -> None:
        self._jobs = {j.id: j for j in snap.jobs}
        self.query_one(JobTable).show(snap)
        # the job just submitted, once listed: the details pane stayed on the one selected before
        if (new := getattr(self.app, "select_next", None)) in self._jobs and self.query_one(JobTable).select_key(new):
            self.app.select_next = None  # type: ignore[attr-defined]
        self._show_detail()
        selected = self.selected
        # it ended: "x" goes, "r" comes (a done job only short of its target); its edit dropped: "d" goes
        self.refresh_bindings_when((selected.state, selected.edit, retryable_row(selected)) if selected else None)

    @property
    def selected(self) -> JobStatus | None:
        key = self.query_one(JobTable).selected_key
        return self._jobs.get(key) if key else None

    def _show_detail(self) -> None:
        self.query_one(JobDetail).show(self.selected, self._nothing_selected())

    def _nothing_selected(self) -> str:
        """An empty screen says why it is empty and how to fill it."""
        if not self._jobs:
            if self.read_only:
                return "No jobs yet."
            return ("No jobs yet. Submit one with n (a job.toml, a directory or a glob), or with ctrl+p, then "
                    "\"submit job\" (the examples are listed there), or from a shell: heet-tui submit JOB.toml")
        words = self.filter_words
        if words and self.query_one(JobTable).row_count == 0:
            # "(560 hidden)" read as every job searched: the 2,500 older ended ones were never listed
            older = sum(n for _, n in self.latest.hidden_ended) if self.latest is not None else 0
            return (f"No job matches \"{words}\" among the {len(self._jobs)} listed; escape clears the filter."
                    + (f" {older} older ended job(s) are not listed here: heet-tui jobs --all lists them, "
                       "heet-tui jobs NAME shows one." if older else ""))
        return "No job selected."

    def on_keyed_table_row_highlighted(self, _: KeyedTable.RowHighlighted) -> None:
        self._show_detail()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "submit_job":
            return not self.read_only
        if action == "cancel_job":
            if self.read_only:
                return False
            job = self.selected
            return job is not None and not job.state.terminal
        if action == "retry_job":
            job = self.selected
            return not self.read_only and not self.demo and job is not None and retryable_row(job)
        if action == "update_job":
            job = self.selected
            return not self.read_only and not self.demo and job is not None and job.state is not JobState.DONE
        if action == "show_log":
            return self.selected is not None
        if action == "drop_edit":
            job = self.selected
            return not self.read_only and job is not None and job.edit.is_set
        return True

    def action_submit_job(self) -> None:
        self.app.action_submit_job()  # type: ignore[attr-defined]

    def action_update_job(self) -> None:
        """The prompt offers the file the job's spec was last read from."""
        job = self.selected
        if job is not None:
            self.app.action_update_job(job.spec_file)  # type: ignore[attr-defined]

    def action_show_log(self) -> None:
        job = self.selected
        if job is not None:
            self.app.push_screen(JobLogDialog(job.id, self.app.job_log))

    def action_cycle_sort(self) -> None:
        table = self.query_one(JobTable)
        name = SORT_CYCLE[(SORT_CYCLE.index(table.sort_name) + 1) % len(SORT_CYCLE)]
        table.set_sort(name, self.latest)
        self.notify(f"sorted by {name}", timeout=2)

    def filtered(self, text: str) -> None:
        self.query_one(JobTable).set_filter(text, self.latest)
        self._show_detail()

    def table_widget(self) -> JobTable:
        return self.query_one(JobTable)

    def action_drop_edit(self) -> None:
        job = self.selected
        if job is not None and job.edit.is_set:
            self.request(DropEdit(job.id), f"drop the edit to {job.id}")

    def action_retry_job(self) -> None:
        job = self.selected
        if job is not None and retryable_row(job):
            self.request(RetryJob(job.id), f"retry {job.id}")

    def on_key(self, event: events.Key) -> None:
        """r on a job it cannot retry says why: retrying down a list, the retried row moved up (the
        table sorts by state) and the next r landed on a queued job, with nothing said."""
        job = self.selected
        if isinstance(self.app.focused, Input):  # an r typed into the filter
            return
        if self.demo and event.key in ("r", "u") and not self.read_only and job is not None:
            self.app.notify("the demo's jobs are simulated from a workload: they cannot be retried or updated",
                            timeout=5)
        elif event.key == "r" and not self.read_only and job is not None and not retryable_row(job):
            self.app.notify(f"{job.id} is {job.state.value}: r retries a failed or cancelled job, or one done short "
                            "of its target", timeout=5)

    def action_cancel_job(self) -> None:
        job = self.selected
        if job is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.request(CancelJob(job.id), f"cancel {job.id}")

        named = f" ({job.name})" if job.name != job.id else ""  # "wide-cnn (wide-cnn)" said it twice
        # a job that never trained loses nothing: the warning read as if it would
        lost = " Its progress since the last checkpoint is lost." if job.allocation or job.progress > 0 else ""
        self.app.push_screen(ConfirmDialog(f"Cancel job {job.id}{named}?{lost}", yes="Cancel job"), answered)


def retryable_row(job: JobStatus) -> bool:
    """As ``core.job.retryable``, from what a row knows: done with some progress, short of 100%."""
    return job.state in RETRYABLE or (job.state is JobState.DONE and 0 < job.progress < 1)
