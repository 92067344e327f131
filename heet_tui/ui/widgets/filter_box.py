"""`/` filters a screen's table by words; escape clears it. Shared by the Jobs and Cluster screens:
at lab scale (80 hosts, 500 jobs) a table shows a fraction of its rows, and scrolling was the
only way to find one."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

FILTER_BINDINGS = [Binding("slash", "filter", "Filter"),
                   Binding("escape", "clear_filter", "Clear filter", show=False)]


class FilterBox(Input):
    DEFAULT_CSS = "FilterBox { dock: bottom; display: none; } FilterBox.shown { display: block; }"

    def __init__(self, placeholder: str) -> None:
        super().__init__(placeholder=placeholder, id="filter")


class FilterKeys:
    """Mixed into a screen with a ``FilterBox``: ``filtered(text)`` applies the words to its
    table, ``table_widget()`` is what gets the focus back."""

    def filtered(self, text: str) -> None:
        raise NotImplementedError

    def table_widget(self):
        raise NotImplementedError

    @property
    def filter_words(self) -> str:
        return self.query_one(FilterBox).value.strip()  # type: ignore[attr-defined]

    def action_filter(self) -> None:
        box = self.query_one(FilterBox)  # type: ignore[attr-defined]
        box.add_class("shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, FilterBox):
            self.filtered(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FilterBox):
            self.table_widget().focus()

    def action_clear_filter(self) -> None:
        box = self.query_one(FilterBox)  # type: ignore[attr-defined]
        box.value = ""
        box.remove_class("shown")
        self.table_widget().focus()
