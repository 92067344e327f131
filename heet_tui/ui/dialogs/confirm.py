"""Yes/no before anything that cannot be undone (cancel a job, remove a host)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Button, Label

from heet_tui.ui.dialogs.base import Dialog, DialogBox, dialog_foot
from heet_tui.ui.widgets.screen_footer import ScreenFooter


class ConfirmDialog(Dialog[bool]):
    DEFAULT_CSS = """
    ConfirmDialog DialogBox { width: 60; border: thick $warning; padding: 1 2; }
    ConfirmDialog #question { width: 100%; margin-bottom: 1; }  /* wraps: a long question is never cut off */
    """
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with DialogBox():
            yield Label(self.question, id="question", markup=False)
            yield dialog_foot(Button("No", id="no"), Button(self.yes, id="yes", variant="error"))
        yield ScreenFooter()  # the keys answering it: the screen's own footer below read "n Submit"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
