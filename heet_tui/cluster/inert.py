"""Everything an agent sends, made inert before the controller keeps or shows any of it.

A host's agent (or a job's output it forwards) is not trusted with the admin's terminal: a GPU
name, a warning, a process name or a log line holding ``ESC]0;...BEL ESC[2J`` retitled the
window and wiped the TUI's screen, and printed by ``status`` or ``tail -f controller.log`` it did
the same there. Terminal sequences (colours, cursor moves, titles) are dropped; any other control
character, and the marks that reverse text on screen, is shown escaped (``\\x1b``, ``\\u202e``).
Numbers that JSON should not hold (NaN, infinities: they broke the observations table) become
None. Tabs and newlines stay: a stderr tail is several lines.
"""

from __future__ import annotations

import math
import re
from typing import Any

from heet_tui.core.escaped import UNSAFE, escaped

_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]")


def inert_text(text: str) -> str:
    return escaped(_SEQUENCE.sub("", text))


def inert(value: Any) -> Any:
    """``value`` (decoded JSON) with every string inert and every non-finite number None."""
    if isinstance(value, str):
        return inert_text(value) if _SEQUENCE.search(value) or UNSAFE.search(value) else value
    if isinstance(value, dict):
        return {inert(k) if isinstance(k, str) else k: inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [inert(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
