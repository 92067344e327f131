"""What a login shell prints before the agent's start command runs, read past and set aside.

An SSH exec channel runs the command through the user's login shell, which on many lab hosts
prints first: a ``.bashrc`` that echoes a welcome or quota line, ``module load`` chatter, a
site-wide ``/etc/bash.bashrc``. That output lands on the same stdout as the agent protocol,
and every such host used to fail with "printed 'Welcome ...' before the agent banner", until
the user changed a shell file that is often not theirs to change. So the start command prints
``SHELL_READY`` first; whatever came before it is the shell's, logged and skipped, within limits
(a shell that prints without end is still refused, quoting what it printed).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time

from heet_tui.cluster.errors import AgentFailure
from heet_tui.cluster.inert import inert_text

log = logging.getLogger(__name__)

SHELL_READY = '{"event":"shell_ready"}'
MAX_LINES = 500
MAX_BYTES = 256 << 10


def after_login(command: str) -> str:
    """``command`` with the marker printed first (the login shell has said all it says by then)."""
    return f"echo {shlex.quote(SHELL_READY)}; {command}"


async def first_command_line(stdout, timeout_s: float, where: str) -> bytes:
    """The first line the start command printed, past the login shell's output; b"" at EOF
    (the caller reads stderr for why)."""
    deadline = time.monotonic() + timeout_s
    skipped: list[bytes] = []
    size = 0
    while True:
        line = await asyncio.wait_for(stdout.readline(), max(0.0, deadline - time.monotonic()))
        if not line:
            return b""
        if line.strip() == SHELL_READY.encode():
            break
        skipped.append(line)
        size += len(line)
        if len(skipped) > MAX_LINES or size > MAX_BYTES:
            shown = skipped[0].decode("utf-8", "replace").strip()[:120]
            raise AgentFailure(f"{where}: the login shell printed over {MAX_LINES} lines or {MAX_BYTES >> 10} KiB "
                               f"before the agent could start, beginning {shown!r}: something in the login shell "
                               "(.bashrc?) keeps writing to stdout, which the agent protocol needs")
    if skipped:
        # a .bashrc's escapes reached `tail -f controller.log` raw: retitled and cleared the terminal
        text = inert_text(" | ".join(s.decode("utf-8", "replace").strip() for s in skipped[:3]))
        log.info("%s: the login shell printed %d line(s) before the agent started (skipped): %s%s", where,
                 len(skipped), text[:300], " ..." if len(skipped) > 3 else "")
    return await asyncio.wait_for(stdout.readline(), max(0.0, deadline - time.monotonic()))
