"""Profiles screen: pick a job, see its throughput heat map and its scaling curve per GPU type."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from heet_tui.core.snapshot import JobProfile, Snapshot
from heet_tui.ui.format import short_id
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.widgets.keyed_table import KeyedTable
from heet_tui.ui.widgets.profile_heatmap import heatmap, scaling_curves
from heet_tui.ui.widgets.screen_footer import ScreenFooter
from heet_tui.ui.widgets.status_line import StatusLine


class ProfilesScreen(SnapshotScreen):
    # Below NARROW columns the job list goes above the heat map: beside it, an 80-column
    # terminal left the map 44 columns and every cell read "●…".
    DEFAULT_CSS = """
    ProfilesScreen #profile-side { width: 34; }
    ProfilesScreen #profiles-hidden { height: auto; color: $text-muted; padding: 0 1; }
    ProfilesScreen #profile-view { width: 1fr; padding: 0 1; }
    ProfilesScreen.-narrow #profile-split { layout: vertical; }
    ProfilesScreen.-narrow #profile-side { width: 1fr; height: auto; }
    ProfilesScreen.-narrow #profile-view { height: 1fr; }
    """
    NARROW = 110

    def __init__(self) -> None:
        super().__init__()
        self._profiles: dict[str, JobProfile] = {}
        self._shown: JobProfile | None = None

    def compose(self) -> ComposeResult:
        yield StatusLine("Profiles")
        with Horizontal(id="profile-split"):
            with Vertical(id="profile-side"):
                yield KeyedTable((("job", "Job"), ("measured", "Measured"), ("predicted", "Predicted")),
                                 id="profile-jobs")
                yield Static(id="profiles-hidden")
            with VerticalScroll(id="profile-view"):
                yield Static("No profiles yet: jobs are profiled when they are submitted.", id="heatmap")
                yield Static(id="scaling")
        yield ScreenFooter()

    def on_mount(self) -> None:
        self._fit(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        narrow = width < self.NARROW
        self.set_class(narrow, "-narrow")
        # inline: the table's own "height: 1fr" outranks a screen rule here
        self.query_one("#profile-jobs", KeyedTable).styles.height = 7 if narrow else "1fr"

    def render_snapshot(self, snap: Snapshot) -> None:
        self._profiles = {p.job_id: p for p in snap.profiles}
        rows = {}
        for p in snap.profiles:
            measured = sum(1 for c in p.cells if c.measured)
            rows[p.job_id] = (short_id(p.job_id), str(measured), str(len(p.cells) - measured))
        self.query_one("#profile-jobs", KeyedTable).sync(rows)
        hidden, said = snap.profiles_hidden, self.query_one("#profiles-hidden", Static)
        said.display = hidden > 0
        said.update(f"{hidden} older ended job{'s' if hidden != 1 else ''} not listed")
        self._show()

    def on_keyed_table_row_highlighted(self, _: KeyedTable.RowHighlighted) -> None:
        self._show()

    def _show(self) -> None:
        key = self.query_one("#profile-jobs", KeyedTable).selected_key
        profile = self._profiles.get(key) if key else None
        if profile == self._shown:
            return  # the heat map is the costliest thing here; redraw only when it changed
        self._shown = profile
        if profile is None:
            self.query_one("#heatmap", Static).update("No profiles yet: jobs are profiled when they are submitted.")
            self.query_one("#scaling", Static).update("")
            return
        if not profile.cells:  # an empty heat map renders as a column of broken words
            job = next((j for j in self.latest.jobs if j.id == profile.job_id), None) if self.latest else None
            why = f" ({job.message})" if job is not None and job.message else ""
            self.query_one("#heatmap", Static).update(Text(f"{profile.job_id}: nothing measured or predicted yet{why}."))
            self.query_one("#scaling", Static).update("")
            return
        self.query_one("#heatmap", Static).update(heatmap(profile))
        self.query_one("#scaling", Static).update(scaling_curves(profile))
