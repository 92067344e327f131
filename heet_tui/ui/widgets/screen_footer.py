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
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

WIDE_COLUMNS = 100
KEPT = ("help", "app.help", "quit", "app.quit")  # never left out
"""Columns from which every screen's keys and the palette key fit side by side, spaced out."""


class ScreenFooter(Footer):
    """A screen may name actions its footer leaves out when every key would not fit
    (``FOOTER_OPTIONAL``, keys the help lists): a failed job with an edit offered so many keys on
    the Jobs screen that q Quit was cut off at 80 columns. Narrower still (60 columns), the screen
    keys ("12345 Screens", in the help too) go next, so that q Quit stays."""

    _dropped: tuple[str, ...] = ()

    def compose(self) -> ComposeResult:
        self._dropped = self._to_drop()
        shown = [b for _, b, _, _ in self.screen.active_bindings.values() if b.show]
        gone = {b.group.description for b in shown if b.group is not None} - {
            b.group.description for b in shown if b.group is not None and b.action not in self._dropped}
        for widget in super().compose():  # passed on as made: key groups are built around them
            if isinstance(widget, FooterKey) and widget.action in self._dropped:
                continue
            if isinstance(widget, FooterLabel) and str(widget.render()) in gone:
                continue  # the label of a group whose keys all gave way
            yield widget
        if gone:
            self.call_after_refresh(self._hide_empty_groups)

    def _hide_empty_groups(self) -> None:
        """An emptied key group still took its place: q Quit sat past the edge at 60 columns."""
        for group in self.query(KeyGroup):
            group.display = bool(group.children)

    def _to_drop(self) -> tuple[str, ...]:
        """The fewest keys to leave out for the rest to fit, in the order given up: the screen's
        optional ones, the screen keys as one group ("345 Screens" read as if there were three),
        then, on a very narrow terminal, the others from the right; never Help or Quit."""
        if not (self.compact and self._bindings_ready and self.size.width):
            return ()
        shown = [b for _, b, _, _ in self.screen.active_bindings.values() if b.show]
        steps = [[a] for a in getattr(self.screen, "FOOTER_OPTIONAL", ())]
        steps.append([b.action for b in shown if b.group is not None])
        steps += [[b.action] for b in reversed(shown) if b.group is None and b.action not in KEPT]
        dropped: list[str] = []
        for step in [[], *steps]:
            dropped += step
            if self._width(set(dropped)) <= self.size.width - 1:
                break
        return tuple(dropped)

    def _width(self, skip: set[str]) -> int:
        """Columns the compact footer takes: "k Description" and a space per key; a group's keys
        run together ("12345"), then its label between spaces."""
        out, groups = 0, set()
        for _, binding, _, _ in self.screen.active_bindings.values():
            if not binding.show or binding.action in skip:
                continue
            shown = self.app.get_key_display(binding)
            if binding.group is None:
                out += len(shown) + len(binding.description) + 2
            else:
                out += len(shown) + (len(binding.group.description) + 2 if binding.group not in groups else 0)
                groups.add(binding.group)
        return out

    def on_resize(self, event: events.Resize) -> None:
        """Laid out again where the width changes what fits: built at 60 columns, Sort and Filter
        stayed out at 80; built at 80, they pushed Quit off at 60."""
        wide = event.size.width >= WIDE_COLUMNS
        if wide != self.show_command_palette:
            self.show_command_palette = wide
            self.compact = not wide
        elif self._to_drop() == self._dropped:
            return
        if self.is_attached:
            self.call_after_refresh(self.recompose)
