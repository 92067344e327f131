"""A controller round that raises: said once where the user looks, not only in the log.

An exception in a round (a bug, or something the code did not foresee) went to
controller.log alone. Under the TUI the screen then showed the last good snapshot for as
long as the fault lasted, and nothing said the controller had stopped planning. Now the
first failure of a kind is a notice naming the error and the log; a round that works again
says so.
"""

from __future__ import annotations

import logging
from pathlib import Path

from heet_tui.control.log_file import LOG_NAME
from heet_tui.control.notices import Notices

log = logging.getLogger(__name__)


class RoundErrors:
    def __init__(self, state_dir: Path | None, notices: Notices) -> None:
        self.where = str(Path(state_dir) / LOG_NAME) if state_dir is not None else "the controller's log"
        self.notices = notices
        self.error: str | None = None  # the failing rounds' error, while they fail
        self.repeats = 0  # rounds that failed the same way since it was said

    def failed(self, exc: Exception) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if error != self.error:  # the traceback once per error, not every round (2 s) while it lasts
            log.exception("controller round failed")
            self.notices.append(f"a controller round failed ({error}); the traceback is in {self.where}. "
                                "Plans and profiling wait until rounds work again; jobs keep running", logged=True)
            self.error, self.repeats = error, 0
        else:
            self.repeats += 1

    def succeeded(self) -> None:
        if self.error is not None:
            log.info("controller rounds work again after %d more failure(s) of %s", self.repeats, self.error)
            self.notices.append(f"controller rounds work again (after: {self.error})", logged=True)
            self.error = None
