"""A checkbox whose state shows without colour.

Textual's draws an X in both states, dim when off: with NO_COLOR, or on a 16-colour terminal,
"pin", "hold" and "shared fs" read as checked whatever they were.
"""

from __future__ import annotations

from textual.widgets import Checkbox


class MarkedCheckbox(Checkbox):
    def render(self):  # noqa: ANN201 - Textual's own return type
        self.BUTTON_INNER = "X" if self.value else " "
        return super().render()
