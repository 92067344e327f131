"""`l` on the Jobs screen: the job's own output, read from its host when asked.

The lines are fetched in a worker: a host that is slow to answer leaves the screen responsive,
and `r` fetches them again. It follows the log as `log -f` does (a user watching a job's loss
had to press r over and over); `f` pauses that, and scrolling up keeps the place being read.
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
    # the one of the two that says what f does now shows: "f Follow" while following read as
    # "press to follow", and pressing it paused the view
    BINDINGS = [Binding("escape,q,l", "close", "Close"), Binding("r", "refresh_log", "Refresh"),
                Binding("f", "toggle_follow", "Pause"), Binding("f", "toggle_follow(True)", "Follow")]
    FOLLOW_S = 2.0  # how often a followed log is read again

    def __init__(self, job_id: str, fetch: Fetch) -> None:
        super().__init__()
        self.job_id, self._fetch = job_id, fetch
        self.fetches = 0
        self.following = True
        self._loading = False
        self._at_end = True  # the view stays at the newest line until the user scrolls up

    def compose(self) -> ComposeResult:
        with DialogBox(can_focus=True):  # nothing else takes the keys that scroll it
            yield Static(Text(f"reading the log of {self.job_id}…"), id="log", markup=False)
        yield ScreenFooter()

    def on_mount(self) -> None:
        self._say_following()
        self.action_refresh_log()
        self.set_interval(self.FOLLOW_S, self._follow)
        # told by the scroll itself, not read at each load: new lines lengthen the view before the
        # scroll to its end lands, and a load in between took the view for scrolled up and stopped
        self.watch(self.query_one(DialogBox), "scroll_y", self._scrolled, init=False)

    def _scrolled(self, old: float, new: float) -> None:
        box = self.query_one(DialogBox)
        was = self._at_end
        if new >= box.max_scroll_y:  # one line up (a single Up) is scrolled up already
            self._at_end = True
        elif new < old:
            self._at_end = False
        if was != self._at_end:
            self._say_following()

    def _follow(self) -> None:
        # a slow host: the next read waits for this one (an exclusive worker restarted each tick
        # would cancel every read before it came back); scrolled up, the lines stay still: the
        # last 200 read again slid under the reader by as many as the job had printed
        if self.following and self._at_end and not self._loading:
            self.action_refresh_log()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_follow":
            return bool(parameters) != self.following
        return True

    def action_toggle_follow(self, follow: bool = False) -> None:
        self.following = follow
        self._say_following()
        self.refresh_bindings()

    def _say_following(self) -> None:
        self.query_one(DialogBox).border_subtitle = (
            "paused: f follows, r reads again" if not self.following
            else "scrolled up: held here; end follows again" if not self._at_end else "following: f pauses")

    def action_refresh_log(self) -> None:
        self._loading = True
        self.run_worker(self._load(), exclusive=True, group="job-log")

    async def _load(self) -> None:
        try:
            lines = await self._fetch(self.job_id)
            if lines and lines[0].startswith(f"{self.job_id} generation "):
                # which run, rank and host: scrolled to the end, the header went off the top, and the
                # job was known only by the checkpoint paths in its lines
                self.query_one(DialogBox).border_title, lines = lines[0].rstrip(":"), lines[1:]
            # a tab drawn as one cell pushed the box's right border out of line
            text = Text("\n".join(lines).expandtabs(8) if lines else f"{self.job_id}: the log is empty")
        except Exception as exc:  # shown where the log would be: the user asked to see it
            said = str(exc)  # the controller's message names the job already ("j: j: cannot read its log")
            text = Text(said if said.startswith(f"{self.job_id}: ") else f"{self.job_id}: {said}", style="red")
        finally:
            self._loading = False
        self.fetches += 1
        self.query_one("#log", Static).update(text)
        # scrolled up to read an earlier line: a new read keeps the place. Asked once the new lines
        # are laid out, whether to follow them: a scroll to the end asked for at the read landed after
        # a scroll up made meanwhile and took the reader back down
        self.call_after_refresh(self._follow_to_end)

    def _follow_to_end(self) -> None:
        if self._at_end and self.is_attached:
            self.query_one(DialogBox).scroll_end(animate=False, immediate=True)

    def action_close(self) -> None:
        self.dismiss(None)
