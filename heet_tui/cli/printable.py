"""Text from jobs and hosts, made safe to print on the user's terminal.

A job's output (its log, a progress line quoted in a warning, a failure's tail) reaches the
login node's terminal through ``heet-tui log``, ``jobs NAME`` and ``run``. Printed raw, an escape
sequence in it could set the clipboard (OSC 52), retitle the window or redraw the screen over
real messages (core/escaped.py says how; right-to-left marks, left raw, reversed lines).
"""

from __future__ import annotations

from heet_tui.core.escaped import escaped


def printable(text: str) -> str:
    return escaped(text)
