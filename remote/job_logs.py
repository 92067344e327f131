"""A job's log file: its tail as a user reads it, and a bound on its size.

A training script that prints a line per step, or a progress bar that redraws itself ten times
a second, writes hundreds of megabytes in a week of training, per run; on a lab host the agent's
workdir is usually in a home directory with a quota, and a full quota stops every job there.
The job holds its log open (O_APPEND), so the file cannot be renamed under it: past its bound
the log is copied to ``<log>.1`` (replacing the previous one) and truncated in place, where the
job's next write lands at offset 0 (what logrotate's copytruncate does). At most twice the bound
is kept; what the job writes between the copy's last read and the truncation is lost: nothing
else runs between the two, and a job printing a line a microsecond lost two lines a rotation.
"""

import os

MAX_SCAN_BYTES = 4 * 1024 * 1024  # how far back from its end a log is read for its tail
MAX_LINE_CHARS = 4096  # a longer line is shown by its start and its end
MAX_TAIL_CHARS = 256 * 1024  # one tail's lines together: a reply stays far below the channel's line limit
_SCAN_BLOCK = 64 * 1024
ROTATE_BYTES = 32 * 1024 * 1024  # a log past this is rotated; launch's log_max_bytes overrides it
MIN_ROTATE_BYTES = 4096
_COPY_CHUNK = 1024 * 1024


def as_shown(line):
    """A line as a terminal shows it: a progress bar redraws itself after ``\r``, so a log
    holds thousands of its updates on one line, and only the last one is worth reading."""
    return line.rstrip("\r").rsplit("\r", 1)[-1]


def rotated_path(path):
    return path + ".1"


def _shortened(line):
    if len(line) <= MAX_LINE_CHARS:
        return line
    keep = MAX_LINE_CHARS // 2
    return "%s [... %d characters ...] %s" % (line[:keep], len(line) - 2 * keep, line[-keep:])


def _tail_lines(path, lines):
    """``(lines, complete)``: the log's last lines as shown; ``complete`` when the whole file was read.

    Read back from the end until the lines are there, up to ``MAX_SCAN_BYTES``: a fixed 64 KiB
    read showed nothing of a script's 200,000-character lines but the last, and said nothing of
    the others. A line too long to show whole is shown by its start and its end."""
    blocks, newlines = [], 0
    try:
        with open(path, "rb") as fh:
            start = size = fh.seek(0, os.SEEK_END)
            while start > 0 and newlines <= lines and size - start < MAX_SCAN_BYTES:
                step = min(_SCAN_BLOCK, start)
                start -= step
                fh.seek(start)
                block = fh.read(step)
                blocks.append(block)
                newlines += block.count(b"\n")
    except OSError:
        return [], True
    text = [as_shown(line) for line in b"".join(reversed(blocks)).decode("utf-8", errors="replace").split("\n")]
    if text and not text[-1]:
        text.pop()
    if start > 0 and text:  # the first line is probably cut: dropped when the others are enough
        text = text[1:] if len(text) > lines else ["[...] " + text[0]] + text[1:]
    return [_shortened(line) for line in text[-lines:]], start == 0


def read_tail(path, lines):
    """The last ``lines`` lines; those before a rotation come from ``<log>.1``, so a job that
    crashes just after its log was rotated still shows what led up to it."""
    if not lines:
        return []
    text, complete = _tail_lines(path, lines)
    if complete and len(text) < lines:
        before, _ = _tail_lines(rotated_path(path), lines - len(text))
        text = before + text
    shown, chars = [], 0
    for line in reversed(text[-lines:]):
        chars += len(line) + 1
        if chars > MAX_TAIL_CHARS:
            break
        shown.append(line)
    return shown[::-1]


def rotate(path):
    """Copy the log to ``<log>.1`` and truncate it: the bytes moved, or None (nothing changed)
    when it cannot. The truncation is the very next call after the read that found the end: what
    the job writes between the two is lost. With the copy's flush and rename in that gap, a job
    printing a line every few microseconds lost hundreds of lines per rotation, and a slower one
    its last progress line now and then; the flush is before the read now, the rename after."""
    kept = rotated_path(path)
    tmp = kept + ".tmp"
    moved = 0
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            with open(tmp, "wb") as dst:
                while True:
                    chunk = os.read(fd, _COPY_CHUNK)
                    if not chunk:
                        os.ftruncate(fd, 0)
                        break
                    dst.write(chunk)
                    dst.flush()
                    moved += len(chunk)
        finally:
            os.close(fd)
        os.replace(tmp, kept)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
        # not opened, not copied (a full disk: the log stays whole), or truncated and the rename
        # failed, where the bytes are gone and the old copy stands: None either way
        return None
    return moved


def remove_log(path):
    for name in (path, rotated_path(path)):
        try:
            os.remove(name)
        except OSError:
            pass
