"""What every dialog shares: a box that fits the terminal, whose body scrolls while its title,
error line and buttons stay in view.

Each dialog used to size its own box (84 columns, as tall as its content): at 80x24 the host
form lost its right border, its checkbox, its error line and its buttons, and neither Tab nor
the wheel reached them, since the scrolling part inside never got shorter than its content.
"""

from __future__ import annotations

from typing import TypeVar

from textual import events
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label, Static

ResultType = TypeVar("ResultType")


class DialogBox(VerticalScroll, can_focus=False):
    """The box is itself the scroll container: a scroll container of auto height with a max-height
    does shrink to the screen and scroll, and its docked children (title, foot) stay put while the
    rest scrolls. Not focusable: the focus goes to the fields, and moving it scrolls them into
    view; a dialog with nothing to focus (help) passes ``can_focus=True`` so the keys scroll it.

    Fields go in a ``DialogBody``: siblings take the focus in the order of where they sit, and a
    docked foot sits above the fields scrolled below it, so Tab went from the field the foot
    covered to the buttons, then back to the fields under them."""

    DEFAULT_CSS = """
    DialogBox { width: 84; max-width: 100%; height: auto; max-height: 100%; border: thick $accent;
                background: $surface; padding: 0 1; }
    DialogBox > .dialog-title { dock: top; width: 100%; text-style: bold; padding-bottom: 1; }
    """

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The screen scrolls a newly focused widget into view only when it lies outside the box,
        not when the docked foot covers it; scrolling here keeps it clear of the title and foot."""
        if event.widget is not self:
            self.scroll_to_widget(event.widget, animate=False)


class DialogBody(Vertical):
    DEFAULT_CSS = "DialogBody { height: auto; }"


class DialogFoot(Vertical):
    """Docked at the bottom of its ``DialogBox``: the error line and the buttons are always seen.
    (Several widgets docked to one edge overlap, hence one container for both.)"""

    DEFAULT_CSS = """
    DialogFoot { dock: bottom; height: auto; }
    DialogFoot > .dialog-error { color: $error; height: auto; min-height: 1; }
    DialogFoot > .dialog-buttons { height: auto; align-horizontal: right; }
    DialogFoot .dialog-hint { width: 1fr; height: 3; content-align: left middle; color: $text-muted; }
    DialogFoot Button { margin-left: 2; }
    """


def dialog_foot(*buttons: Widget, hint: str = "", error_id: str | None = None) -> DialogFoot:
    """The foot of a dialog: an error line (when ``error_id`` names one), the hint, the buttons."""
    row = Horizontal(*([Label(hint, classes="dialog-hint", markup=False)] if hint else []), *buttons,
                     classes="dialog-buttons")
    if error_id is None:
        return DialogFoot(row)
    return DialogFoot(Static("", id=error_id, classes="dialog-error", markup=False), row)


class Dialog(ModalScreen[ResultType]):
    """The box takes no focus of its own, so page up/down scroll it wherever the focus is: the
    tweak's prediction, below its last field, is otherwise out of the keyboard's reach."""

    DEFAULT_CSS = "Dialog { align: center middle; }"
    BINDINGS = [Binding("pageup", "scroll_box(-1)", "Scroll up", show=False),
                Binding("pagedown", "scroll_box(1)", "Scroll down", show=False)]

    def action_scroll_box(self, pages: int) -> None:
        for box in self.query(DialogBox):
            if pages < 0:
                box.scroll_page_up(animate=False)
            else:
                box.scroll_page_down(animate=False)


class FormDialog(Dialog[ResultType]):
    """A dialog of several fields. Enter in a text field moves on to the next field, as Tab does:
    saving there would save a host whose name is all that was typed yet. ctrl+s saves from any
    field, and Enter on a button presses it."""

    HINT = "enter: next field\nctrl+s: save\nesc: cancel"

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()
