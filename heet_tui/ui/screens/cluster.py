"""Cluster screen: every host, grouped by GPU type or rack, `/` filter, with a detail pane for the selected one."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding

from heet_tui.core.intents import ConnectHost, DrainHost
from heet_tui.core.snapshot import HostStatus, Snapshot
from heet_tui.ui.dialogs.drain import drain_asking_first
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.widgets.filter_box import FILTER_BINDINGS, FilterBox, FilterKeys
from heet_tui.ui.widgets.host_detail import HostDetail, HostHistory
from heet_tui.ui.widgets.host_table import HostTable
from heet_tui.ui.widgets.keyed_table import KeyedTable
from heet_tui.ui.widgets.screen_footer import ScreenFooter
from heet_tui.ui.widgets.status_line import StatusLine

CHANGING_ACTIONS = frozenset({"drain", "undrain", "connect", "trust_key"})


class ClusterScreen(FilterKeys, SnapshotScreen):
    FOOTER_OPTIONAL = ("toggle_group", "filter")  # in the help; left out where every key would not fit
    BINDINGS = [
        Binding("g", "toggle_group", "Group"),
        *FILTER_BINDINGS,
        Binding("d", "drain", "Drain"),
        Binding("d", "undrain", "Undrain"),  # the one of the two that fits the selected host shows
        Binding("c", "connect", "Reconnect"),
        Binding("k", "trust_key", "Trust key"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.history = HostHistory()
        self._hosts: dict[str, HostStatus] = {}

    def compose(self) -> ComposeResult:
        yield StatusLine("Cluster")
        yield HostTable(id="hosts")
        yield HostDetail()
        yield FilterBox("filter: words matched against name, GPU type, rack, state, jobs (drained, stale)")
        yield ScreenFooter()

    def on_mount(self) -> None:
        self.query_one(HostTable).regroup("type", None)

    def render_snapshot(self, snap: Snapshot) -> None:
        self.history.record(snap.hosts)
        self._hosts = {h.name: h for h in snap.hosts}
        self.query_one(HostTable).show(snap)
        self._show_detail()
        selected = self.selected
        self.refresh_bindings_when((selected.state, selected.drained) if selected else None)  # "k" goes, "d" turns

    @property
    def selected(self) -> HostStatus | None:
        key = self.query_one(HostTable).selected_key
        return self._hosts.get(key) if key else None

    def _show_detail(self) -> None:
        now = self.latest.now if self.latest else 0.0
        self.query_one(HostDetail).show(self.selected, now, self.history)

    def on_keyed_table_row_highlighted(self, _: KeyedTable.RowHighlighted) -> None:
        self._show_detail()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CHANGING_ACTIONS:
            if self.read_only:
                return False
            if self.demo:
                return False  # simulated hosts: nothing to drain, reconnect or trust
            host = self.selected
            if host is None:
                return False
            if action == "trust_key":
                return host.state.awaits_trust
            if action in ("drain", "undrain"):
                return host.drained == (action == "undrain")
        return True

    def filtered(self, text: str) -> None:
        self.query_one(HostTable).set_filter(text, self.latest)
        self._show_detail()

    def table_widget(self) -> HostTable:
        return self.query_one(HostTable)

    def action_toggle_group(self) -> None:
        table = self.query_one(HostTable)
        table.regroup("rack" if table.group_by == "type" else "type", self.latest)
        self.notify(f"hosts grouped by {table.group_by}")

    def action_drain(self) -> None:
        """Undrains at once; drains at once a host no job runs on, and asks first for one that has
        jobs, which then stop and move (dialogs/drain.py, as the palette's "drain host…")."""
        host = self.selected
        if host is None:
            return
        if host.drained:
            self.request(DrainHost(host.name, False), f"undrain {host.name}")
            return
        drain_asking_first(self.app, host.name, self.latest, self.request)

    action_undrain = action_drain

    def action_connect(self) -> None:
        host = self.selected
        if host is not None:
            self.request(ConnectHost(host.name), f"reconnect {host.name}")

    def action_trust_key(self) -> None:
        host = self.selected
        if host is not None:
            self.app.ask_host_key(host)  # type: ignore[attr-defined]
