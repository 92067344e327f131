"""What every main screen shares: a status line, the latest snapshot, and intents sent upwards."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

from heet_tui.core.intents import Intent
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.messages import IntentRequested
from heet_tui.ui.widgets.status_line import StatusLine


class SnapshotScreen(Screen):
    """A screen that renders snapshots; only the visible one is updated, the others on resume."""

    # First in every footer: the app's keys came after the screen's, and at 80 columns "? Help"
    # (where every other key is explained) was cut off on every screen.
    BINDINGS = [Binding("question_mark", "app.help", "Help")]
    _ready = False
    _bindings_key: object = None

    @property
    def read_only(self) -> bool:
        """Nothing the controller does can be asked for: a read-only TUI, or one whose controller has
        stopped (its footer went on offering p, t and n, each refused once tried)."""
        return bool(getattr(self.app, "read_only", False) or getattr(self.app, "stopped", ""))

    @property
    def latest(self) -> Snapshot | None:
        return getattr(self.app, "latest", None)

    @property
    def demo(self) -> bool:
        """The simulator's snapshots: no hosts to drain or connect, no spec files or checkpoints."""
        return self.latest is not None and self.latest.mode == "demo"

    def on_mount(self) -> None:
        self._ready = True
        if self.latest is not None:
            self.apply_snapshot(self.latest)

    def apply_snapshot(self, snap: Snapshot) -> None:
        if not self._ready:
            return  # not composed yet (a snapshot right after a screen switch); on_mount draws the latest
        if not self.app.is_running:
            return  # quitting: the widgets may be gone already (a controller stopping as the TUI quits)
        for line in self.query(StatusLine):
            line.show(snap)
        self.render_snapshot(snap)

    def refresh_status(self) -> None:
        """The header alone, for what changes with no snapshot (the controller stopped before the first)."""
        if self._ready and self.app.is_running:
            for line in self.query(StatusLine):
                line.show(self.latest)

    def render_snapshot(self, snap: Snapshot) -> None:
        """Subclasses draw their widgets here; called on the event loop, so keep it cheap."""

    def on_screen_resume(self) -> None:
        if self.latest is not None:
            self.apply_snapshot(self.latest)
        else:
            self.refresh_status()

    def refresh_bindings_when(self, key: object) -> None:
        """Redraw the footer's keys when what they depend on (a pending plan, the selected row's
        state) changed: the footer re-renders whole, so not on every snapshot."""
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    def request(self, intent: Intent, describe: str = "") -> None:
        self.app.post_message(IntentRequested(intent, describe))
