"""`l` on the Jobs screen: the job's own output, read from its host when asked.

The lines are fetched in a worker: a host that is slow to answer leaves the screen responsive,
and `r` fetches them again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from heet_tui.ui.dialogs.base import Dialog, DialogBox
from heet_tui.ui.widgets.screen_footer import ScreenFooter

Fetch = Callable[[str], Awaitable[tuple[str, ...]]]


class JobLogDialog(Dialog[None]):
    DEFAULT_CSS = """
    JobLogDialog DialogBox { width: 95%; height: 85%; padding: 0; }
    JobLogDialog #log { width: 100%; }
    """
    BINDINGS = [Binding("escape,q,l", "close", "Close"), Binding("r", "refresh_log", "Refresh")]

    def __init__(self, job_id: str, fetch: Fetch) -> None:
        super().__init__()
        self.job_id, self._fetch = job_id, fetch
        self.fetches = 0

    def compose(self) -> ComposeResult:
        with DialogBox(can_focus=True):  # nothing else takes the keys that scroll it
            yield Static(Text(f"reading the log of {self.job_id}…"), id="log", markup=False)
        yield ScreenFooter()

    def on_mount(self) -> None:
        self.action_refresh_log()

    def action_refresh_log(self) -> None:
        self.run_worker(self._load(), exclusive=True, group="job-log")

    async def _load(self) -> None:
        try:
            lines = await self._fetch(self.job_id)
            if lines and lines[0].startswith(f"{self.job_id} generation "):
                # which run, rank and host: scrolled to the end, the header went off the top, and the
                # job was known only by the checkpoint paths in its lines
                self.query_one(DialogBox).border_title, lines = lines[0].rstrip(":"), lines[1:]
            text = Text("\n".join(lines) if lines else f"{self.job_id}: the log is empty")
        except Exception as exc:  # shown where the log would be: the user asked to see it
            text = Text(f"{self.job_id}: {exc}", style="red")
        self.fetches += 1
        self.query_one("#log", Static).update(text)
        self.query_one(DialogBox).scroll_end(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
