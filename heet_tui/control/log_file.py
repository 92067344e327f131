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

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path

LOG_NAME = "controller.log"


class _Rotated(RotatingFileHandler):
    """Rotates itself at its size, and reopens its path when something else moved the file."""

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is not None and self._moved():
            self.stream.close()
            self.stream = None  # reopened by the emit below
        super().emit(record)

    def _open(self):  # type: ignore[no-untyped-def]
        """Every file it opens is private, the ones its own rotation starts too (they took the umask)."""
        _create_private(Path(self.baseFilename))
        return super()._open()

    def _moved(self) -> bool:
        try:
            now = os.stat(self.baseFilename)
        except FileNotFoundError:
            return True
        open_one = os.fstat(self.stream.fileno())
        return (now.st_dev, now.st_ino) != (open_one.st_dev, open_one.st_ino)


def _create_private(path: Path) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))


def attach_log_file(state_dir: Path) -> logging.Handler:
    path = state_dir / LOG_NAME
    _create_private(path)
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
