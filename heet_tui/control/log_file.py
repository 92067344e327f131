"""The controller's log, a file in its state directory.

Errors inside the controller (a failed round, an event it could not handle, a plan step that
raised) were written to stderr by Python's last-resort handler: under the TUI, which owns the
terminal, they were never seen, and with `heet-tui run` they scrolled away. Now they go to
``<state>/controller.log`` (private to the user like the rest of the directory, rotated at
5 MB, three old files kept), where a user can read what went wrong after the fact. An outside
logrotate that moves the file away (its default, no ``copytruncate``) is noticed at the next
record, which goes to a new file: the controller wrote on into the moved one, for days.
"""

from __future__ import annotations

import contextlib
import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

LOG_NAME = "controller.log"


class _Rotated(RotatingFileHandler):
    """Rotates itself at its size, and reopens its path when something else moved the file."""

    lost = 0  # records not written since the file last took one (its disk full)
    lost_why = ""

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is not None and self._moved():
            self.stream.close()
            self.stream = None  # reopened by the emit below
        lost = self.lost
        super().emit(record)
        if lost and self.lost == lost:  # this one went in: say what did not (lost is 0 for that one)
            self.lost = 0
            self.emit(logging.makeLogRecord({"name": __name__, "levelno": logging.WARNING, "levelname": "WARNING",
                                             "msg": f"{lost} log record(s) before this one were lost: {self.lost_why} "
                                                    "(the events are in the state store too, unless it shares the full disk: heet-tui jobs NAME)"}))

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        """A full disk under the log printed a 50-line "--- Logging error ---" traceback per
        record into `heet-tui run`'s output (669 lines for ten events), and one into the TUI's
        terminal: counted here and said in the log once it takes writes again."""
        import sys

        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handleError(record)
            return
        self.lost += 1
        self.lost_why = f"{LOG_NAME} could not be written ({exc.strerror or exc})"
        if self.stream is not None:  # a half-written line stays in the buffer: dropped, not retried
            with contextlib.suppress(OSError):
                self.stream.close()
            self.stream = None

    def _open(self):  # type: ignore[no-untyped-def]
        """Every file it opens is private, the ones its own rotation starts too (they took the umask)."""
        _create_private(Path(self.baseFilename))
        return super()._open()

    def _moved(self) -> bool:
        try:
            now = os.stat(self.baseFilename)
            open_one = os.fstat(self.stream.fileno())
        except FileNotFoundError:
            return True
        except (OSError, ValueError):  # not for this to fail a log call: the write says what is wrong
            return False
        return (now.st_dev, now.st_ino) != (open_one.st_dev, open_one.st_ino)


def _create_private(path: Path) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))


def attach_log_file(state_dir: Path) -> logging.Handler:
    path = state_dir / LOG_NAME
    handler = _Rotated(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    logger = logging.getLogger("heet_tui")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
    return handler


def detach_log_file(handler: logging.Handler) -> None:
    logging.getLogger("heet_tui").removeHandler(handler)
    handler.close()
