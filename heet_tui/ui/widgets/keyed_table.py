"""A virtual table kept in step with a keyed set of rows, with the cursor pinned to a row's key.

Textual's DataTable re-renders every visible cell through Rich after any change and re-measures
whole columns, which costs hundreds of milliseconds a snapshot at 2,000 jobs. This table draws
only the rows on screen (Line API), caches each rendered row until its cells change, diffs rows
by key in ``sync``, and keeps the cursor on the same key as rows are re-sorted, added or removed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

Cells = tuple[Any, ...]
GAP = 2
MAX_COLUMN = 48


class KeyedTable(ScrollView, can_focus=True):
    """Rows are addressed by string keys; the first column holds the key itself."""

    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    KeyedTable > .keyed-table--header { text-style: bold; background: $panel; }
    KeyedTable > .keyed-table--cursor { background: $accent 40%; color: $text; }
    KeyedTable:focus > .keyed-table--cursor { background: $accent; color: $text; }
    """
    COMPONENT_CLASSES = {"keyed-table--header", "keyed-table--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    @dataclass
    class RowHighlighted(Message):
        table: KeyedTable
        key: str | None

        @property
        def control(self) -> KeyedTable:
            return self.table

    @dataclass
    class RowSelected(Message):
        table: KeyedTable
        key: str

        @property
        def control(self) -> KeyedTable:
            return self.table

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._column_spec = tuple(columns)
        self._base_labels = self._column_spec
        self._widths = [len(label) for _, label in self._column_spec]
        self._rows: dict[str, Cells] = {}
        self._order: list[str] = []
        self._index: dict[str, int] = {}
        self._order_key: Callable[[str], Hashable] | None = None
        self._reverse = False
        self._cache: dict[str, Strip] = {}
        self._header: Strip | None = None
        self.cursor_row = 0
        self._last_highlight: str | None = None

    # -- reading ---------------------------------------------------------------------------------

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self._column_spec)

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor (``None`` for an empty table)."""
        return self._order[self.cursor_row] if 0 <= self.cursor_row < len(self._order) else None

    def cells_for(self, key: str, source: Any) -> Cells:
        """The cells of one row; subclasses turn their row source (e.g. a JobStatus) into cells here.

        Called only for rows that are drawn, so a 2,000-row table formats the ~50 rows on screen.
        """
        return source

    def get_row(self, key: str) -> list[Any]:
        return list(self.cells_for(key, self._rows[key]))

    def get_row_at(self, index: int) -> list[Any]:
        return self.get_row(self._order[index])

    def get_row_index(self, key: str) -> int:
        return self._index[key]

    # -- changing ----------------------------------------------------------------------------------

    def order_by(self, key: Callable[[str], Hashable] | None, reverse: bool = False) -> None:
        """Sort rows by ``key(row_key)`` from now on (``None``: insertion order), keeping the cursor
        on its row and that row on screen: a new sort moved the row 50 lines down while the view
        stayed at the top, the details pane on a job no line showed."""
        selected = self.selected_key
        self._order_key, self._reverse = key, reverse
        self._reorder(selected, follow=True)
        self.refresh()

    def mark_column(self, column: str | None, mark: str = " ▼") -> None:
        """Append ``mark`` to one column's label (the sort column), removing it from the others."""
        base = {k: label for k, label in self._base_labels}
        self._column_spec = tuple((k, base[k] + (mark if k == column else "")) for k in base)
        for i, (_, label) in enumerate(self._column_spec):
            self._widths[i] = max(self._widths[i], len(label))
        self._header = None
        self._cache.clear()
        self.refresh()

    def redraw_all(self) -> None:
        """Every row drawn again from its source, columns as wide as their cells then are (they
        only ever widen otherwise): for a subclass whose cells change with the table's width."""
        self._widths = [len(label) for _, label in self._column_spec]
        self._cache.clear()
        self._header = None
        self.virtual_size = Size(sum(self._widths) + GAP * len(self._widths), len(self._order) + 1)
        self.refresh()

    def select_key(self, key: str) -> bool:
        if key not in self._index:
            return False
        self._move_to(self._index[key])
        return True

    def sync(self, rows: Mapping[str, Any]) -> None:
        """Make the table show exactly ``rows`` (key -> row source), re-rendering only rows that changed."""
        selected = self.selected_key
        old = self._rows
        membership = len(rows) != len(old) or any(k not in old for k in rows)
        cache = self._cache
        for key, source in rows.items():
            before = old.get(key)
            if before is not source and before != source:
                cache.pop(key, None)
        self._rows = dict(rows)
        if membership or self._order_key is not None:
            self._reorder(selected)
        self.refresh()

    # -- internals ---------------------------------------------------------------------------------

    def _note_widths(self, cells: Cells) -> bool:
        widened = False
        for i, cell in enumerate(cells):
            width = min(MAX_COLUMN, _cell_text(cell).cell_len)
            if width > self._widths[i]:
                self._widths[i] = width
                widened = True
        return widened

    def _reorder(self, selected: str | None, follow: bool = False) -> None:
        """Order the rows afresh, the cursor on ``selected``'s row wherever it went. The view goes
        with it when ``follow`` (the user chose the order) or when the row was on screen before
        (a snapshot re-sorted it): a row the user scrolled away from with the mouse stays away."""
        before, shown = self.cursor_row, self._cursor_on_screen()
        if self._order_key is None:
            order = [k for k in self._order if k in self._rows] if self._order else list(self._rows)
            known = set(order)
            order += [k for k in self._rows if k not in known]
        else:
            order_key = self._order_key
            order = sorted(self._rows, key=order_key, reverse=self._reverse)
        self._order = order
        self._index = {k: i for i, k in enumerate(order)}
        width = sum(self._widths) + GAP * len(self._widths)
        self.virtual_size = Size(width, len(order) + 1)
        if selected is not None and selected in self._index:
            self.cursor_row = self._index[selected]
        else:
            self.cursor_row = min(self.cursor_row, max(0, len(order) - 1))
        if order and self.scrollable_content_region.height > 1 and (follow or (shown and self.cursor_row != before)):
            self._scroll_cursor_into_view()
        self._highlight_changed()

    def _cursor_on_screen(self) -> bool:
        """Whether the cursor's row is one of the lines drawn now (under the header)."""
        top = int(self.scroll_offset.y)
        return top <= self.cursor_row < top + self.scrollable_content_region.height - 1

    def _highlight_changed(self) -> None:
        key = self.selected_key
        if key != self._last_highlight:
            self._last_highlight = key
            self.post_message(self.RowHighlighted(self, key))

    def _move_to(self, index: int, scroll: bool = True) -> None:
        if not self._order:
            return
        self.cursor_row = max(0, min(index, len(self._order) - 1))
        if scroll:
            self._scroll_cursor_into_view()
        self.refresh()
        self._highlight_changed()

    def _scroll_cursor_into_view(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    def _render_cells(self, cells: Sequence[Any], style: Style | None = None) -> Strip:
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        for width, cell in zip(self._widths, cells, strict=False):
            text = _cell_text(cell).copy()
            text.truncate(width, overflow="ellipsis", pad=True)
            line.append_text(text)
            line.append(" " * GAP)
        # every segment styled: a plain cell's came out with None, which Textual's NO_COLOR filter
        # cannot take (the Profiles screen crashed the TUI under NO_COLOR=1)
        segments = [Segment(text, seg_style or Style.null(), control)
                    for text, seg_style, control in line.render(self.app.console)]
        strip = Strip(segments, line.cell_len)
        return strip.apply_style(style) if style is not None else strip

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x, scroll_y = int(self.scroll_offset.x), int(self.scroll_offset.y)
        if y == 0:
            if self._header is None:
                labels = [Text(label) for _, label in self._column_spec]
                self._header = self._render_cells(labels, self.get_component_rich_style("keyed-table--header"))
            header_style = self.get_component_rich_style("keyed-table--header")
            return self._visible(self._header, scroll_x, width, header_style)
        index = scroll_y + y - 1
        if index >= len(self._order):
            return Strip.blank(width, self.rich_style)
        key = self._order[index]
        strip = self._cache.get(key)
        if strip is None:
            cells = self.cells_for(key, self._rows[key])
            if self._note_widths(cells):
                # A wider cell than any drawn so far: redraw everything at the new widths next frame.
                self._cache.clear()
                self._header = None
                self.virtual_size = Size(sum(self._widths) + GAP * len(self._widths), len(self._order) + 1)
                self.refresh()
            strip = self._cache[key] = self._render_cells(cells)
        if index == self.cursor_row:
            cursor = self.get_component_rich_style("keyed-table--cursor")
            # the cursor's colours over each cell's own: a job's colour on the cursor's background
            # read green on orange, and under NO_COLOR grey 247 on grey 248, on the one row acted on
            over = Strip([Segment(text, (style or Style()) + cursor, control) for text, style, control in strip],
                         strip.cell_length)
            return self._visible(over, scroll_x, width, self.rich_style + cursor)
        return self._visible(strip, scroll_x, width, self.rich_style)

    def _visible(self, strip: Strip, scroll_x: int, width: int, style: Style) -> Strip:
        """The first column (the row's name) stays put while the others scroll sideways: scrolled
        right on a narrow terminal, no row said which job it was. Not where it would take half
        the width."""
        fixed = self._widths[0] + GAP if self._widths else 0
        if scroll_x <= 0 or not fixed or fixed * 2 > width:
            return _cut_marked(strip, scroll_x, width, style)
        return Strip.join([strip.crop_extend(0, fixed, style), _cut_marked(strip, fixed + scroll_x, width - fixed, style)])

    def on_resize(self, _: events.Resize) -> None:
        self._cache.clear()
        self._header = None

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._move_to(int(self.scroll_offset.y) + event.y - 1, scroll=False)
            if event.chain >= 2 and self.selected_key is not None:
                self.post_message(self.RowSelected(self, self.selected_key))

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 2))

    def action_jump(self, where: int) -> None:
        self._move_to(0 if where == 0 else len(self._order) - 1)

    def action_select(self) -> None:
        if self.selected_key is not None:
            self.post_message(self.RowSelected(self, self.selected_key))


def _cell_text(cell: Any) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def _cut_marked(strip: Strip, scroll_x: int, width: int, style: Style) -> Strip:
    """The visible part of a line, ending in "…" where more of it lies to the right (cut at the
    screen's edge, "8xRTX2080Ti emulated, speed 0.4" read "speed 0"), and starting with one where
    the line is scrolled past its start."""
    shown = strip.crop_extend(scroll_x, scroll_x + width, style)
    if width < 2:
        return shown
    if strip.crop(scroll_x + width, strip.cell_length).text.strip():  # more than the gap is out
        shown = Strip.join([shown.crop(0, width - 1), Strip([Segment("…", style)], 1)])
    if scroll_x > 0:
        shown = Strip.join([Strip([Segment("…", style)], 1), shown.crop(1, width)])
    return shown
