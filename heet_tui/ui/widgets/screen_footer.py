"""The footer every screen shows: all its keys, on a narrow terminal too.

Textual docks "^p palette" at the right and lays the screen's keys out in what is left, so on an
80-column terminal the Jobs screen lost Retry, Drop edit, the screen keys and Quit to a key the
help already names. Below :data:`WIDE_COLUMNS` the footer leaves the palette key out (ctrl+p
still opens the palette) and packs the keys closer (Textual's compact style, with the space after
the screen group's label that that style drops: it read "Screensq Quit").
"""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

WIDE_COLUMNS = 100
"""Columns from which every screen's keys and the palette key fit side by side, spaced out."""


class ScreenFooter(Footer):
    def on_resize(self, event: events.Resize) -> None:
        wide = event.size.width >= WIDE_COLUMNS
        if wide != self.show_command_palette:
            self.show_command_palette = wide
            self.compact = not wide
            if self.is_attached:
                self.call_after_refresh(self.recompose)
