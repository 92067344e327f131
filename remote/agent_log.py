"""The agent's own log (``<workdir>/agent.log``): its stderr, with the time on every line.

Lines had no time, so a postmortem could not tell which start or error went with which event of
the controller; and the file was only ever appended to. It is moved to ``agent.log.1`` at start
once it passes ``KEEP_BYTES``.
"""

import os
import sys
import time

from heet_agent.atomic_file import open_private

KEEP_BYTES = 2 * 1024 * 1024


class QuietStream:
    """The agent's stderr, which never raises: the log shares a disk with the job table, and a
    full disk must not turn a line of log into the agent's death."""

    def __init__(self, stream):
        self._stream = stream
        self._line_start = True

    def write(self, text):
        try:
            if text:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S ")
                lines = text.splitlines(keepends=True)
                out = "".join((stamp + line) if (i or self._line_start) else line for i, line in enumerate(lines))
                self._line_start = text.endswith("\n")
                self._stream.write(out)
            return len(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def open_agent_log(workdir):
    """Point fd 2 and ``sys.stderr`` at the log, so that nothing written there reaches the
    protocol stream."""
    path = os.path.join(workdir, "agent.log")
    try:
        if os.path.getsize(path) > KEEP_BYTES:
            os.replace(path, path + ".1")
    except OSError:
        pass
    log = open_private(path, "ab", buffering=0)
    os.dup2(log.fileno(), 2)
    log.close()
    sys.stderr = QuietStream(open(2, "w", buffering=1, closefd=False))
