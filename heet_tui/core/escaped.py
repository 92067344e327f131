"""Text others wrote, made safe to show on a terminal.

A job spec's paths and arguments, a submitted file's name and a host's output reach the admin's
terminal through the TUI, ``controller.log`` and the command line. Printed raw, an escape
sequence in them could set the clipboard (OSC 52), retitle the window or redraw the screen over
real messages, and a right-to-left mark shows the rest of the line reversed. Control characters
other than tab and newline, and those marks, are shown escaped (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import re

UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str) -> str:
    return UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                      text)
