"""Text from jobs and hosts, made safe to print on the user's terminal.

A job's output (its log, a progress line quoted in a warning, a failure's tail) reaches the
login node's terminal through ``heet-tui log``, ``jobs NAME`` and ``run``. Printed raw, an escape
sequence in it could set the clipboard (OSC 52), retitle the window or redraw the screen over
real messages. Control characters other than tab are shown escaped instead (``\\x1b``).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
