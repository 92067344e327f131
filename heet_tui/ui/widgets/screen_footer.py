"""The footer every screen shows: all its keys, on a narrow terminal too.

Textual docks "^p palette" at the right and lays the screen's keys out in what is left, so on an
80-column terminal the Jobs screen lost Retry, Drop edit, the screen keys and Quit to a key the
help already names. Below :data:`WIDE_COLUMNS` the footer leaves the palette key out (ctrl+p
still opens the palette) and packs the keys closer (Textual's compact style, with the space after
the screen group's label that that style drops: it read "Screensq Quit").
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

WIDE_COLUMNS = 100
"""Columns from which every screen's keys and the palette key fit side by side, spaced out."""


class ScreenFooter(Footer):
    """A screen may name actions its footer leaves out when every key would not fit
    (``FOOTER_OPTIONAL``, keys the help lists): a failed job with an edit offered so many keys on
    the Jobs screen that q Quit was cut off at 80 columns."""

    def compose(self) -> ComposeResult:
        optional = tuple(getattr(self.screen, "FOOTER_OPTIONAL", ()))
        if not (optional and self.compact and self._bindings_ready and self._width() > self.size.width - 1):
            optional = ()
        for widget in super().compose():  # passed on as made: key groups are built around them
            if not (isinstance(widget, FooterKey) and widget.action in optional):
                yield widget

    def _width(self) -> int:
        """Columns the compact footer takes: "k Description" and a space per key; a group's keys
        run together ("12345"), then its label between spaces."""
        out, groups = 0, set()
        for _, binding, _, _ in self.screen.active_bindings.values():
            if not binding.show:
                continue
            shown = self.app.get_key_display(binding)
            if binding.group is None:
                out += len(shown) + len(binding.description) + 2
            else:
                out += len(shown) + (len(binding.group.description) + 2 if binding.group not in groups else 0)
                groups.add(binding.group)
        return out

    def on_resize(self, event: events.Resize) -> None:
        wide = event.size.width >= WIDE_COLUMNS
        if wide != self.show_command_palette:
            self.show_command_palette = wide
            self.compact = not wide
            if self.is_attached:
                self.call_after_refresh(self.recompose)

