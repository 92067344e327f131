"""Ask for one line of text (a job spec path, a host name, a policy), with suggestions."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

from heet_tui.ui.dialogs.base import Dialog, DialogBox


class PromptDialog(Dialog[str | None]):
    """One field: Enter submits it (a form of several fields moves on instead, ``FormDialog``)."""

    DEFAULT_CSS = """
    PromptDialog DialogBox { width: 80; padding: 1 2; }
    PromptDialog Label { width: 100%; }
    PromptDialog .hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, suggestions: Sequence[str] = (), value: str = "") -> None:
        super().__init__()
        self.question, self.suggestions, self.value = question, tuple(suggestions), value

    def compose(self) -> ComposeResult:
        with DialogBox():
            yield Label(self.question, markup=False)
            yield Input(self.value, suggester=SuggestFromList(self.suggestions, case_sensitive=False))
            if self.suggestions:
                shown = ", ".join(self.suggestions[:6]) + (" …" if len(self.suggestions) > 6 else "")
                yield Label(f"→ completes: {shown}", classes="hint", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
