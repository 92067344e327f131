"""Ask for one line of text (a job spec path, a host name, a policy), with suggestions: the
Input shows the first after the cursor, Tab (or right, or end) takes it, and the line below lists
those that still fit what is typed."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

from heet_tui.ui.dialogs.base import Dialog, DialogBox
from heet_tui.ui.path_completion import PathSuggester
from heet_tui.ui.widgets.screen_footer import ScreenFooter

SHOWN = 6


class PromptDialog(Dialog[str | None]):
    """One field: Enter submits it (a form of several fields moves on instead, ``FormDialog``)."""

    DEFAULT_CSS = """
    PromptDialog DialogBox { width: 80; padding: 1 2; }
    PromptDialog Label { width: 100%; }
    PromptDialog .hint { color: $text-muted; }
    """
    # Tab took focus to nothing (the field is the only one), so a shell user's Tab left the
    # completion shown but not taken, and Enter submitted the half-typed path.
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("tab", "complete", "Complete", show=False)]

    def __init__(self, question: str, suggestions: Sequence[str] = (), value: str = "", paths: bool = False) -> None:
        """``paths``: complete from the filesystem too (job files and directories)."""
        super().__init__()
        self.question, self.suggestions, self.value = question, tuple(suggestions), value
        self._paths = PathSuggester(self.suggestions) if paths else None

    def compose(self) -> ComposeResult:
        suggester = self._paths or SuggestFromList(self.suggestions, case_sensitive=False)
        with DialogBox():
            yield Label(self.question, markup=False)
            yield Input(self.value, suggester=suggester)
            if self.suggestions or self._paths is not None:
                yield Label(self._hint(self.value), id="hint", classes="hint", markup=False)
        yield ScreenFooter()  # its own keys: the screen's footer below named keys that do nothing here

    def _hint(self, typed: str) -> str:
        if self._paths is not None:
            fits = self._paths.matches(typed) if typed else list(self.suggestions)
        else:
            fits = [s for s in self.suggestions if s.casefold().startswith(typed.casefold())]
        if not fits:
            return "→ nothing completes this" if typed else ""
        shown = ", ".join(fits[:SHOWN]) + (" …" if len(fits) > SHOWN else "")
        return f"→ completes (tab): {shown}"

    def on_input_changed(self, event: Input.Changed) -> None:
        for hint in self.query("#hint").results(Label):
            hint.update(self._hint(event.value))

    def action_complete(self) -> None:
        box = self.query_one(Input)
        box.action_end()
        box.action_cursor_right()  # takes the suggestion shown at the end, if any

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
