"""Yes/no before anything that cannot be undone (cancel a job, remove a host)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class ConfirmDialog(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical { width: 60; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    ConfirmDialog Label { width: 100%; }  /* wraps: a long question is never cut off */
    ConfirmDialog Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    ConfirmDialog Button { margin-left: 2; }
    """
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, markup=False)
            with Horizontal():
                yield Button("No", id="no")
                yield Button(self.yes, id="yes", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
