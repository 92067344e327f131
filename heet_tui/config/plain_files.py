"""Reading a file a user named, when it may be anything: a device, a pipe, a huge file.

`ssh_config = "/dev/zero"` (or an `Include` of it) and `sim --workload /dev/zero` read until
memory ran out (10 GB in 9 s on a shared login node); a named pipe nobody writes to hung with no
word. A pipe something writes to (`--trace <(zcat trace.csv.gz)`) is read, up to the same limit
as a file; /dev/null reads as empty (`ssh -F /dev/null`); other devices are refused.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path


class NotPlainFile(OSError):
    """The path is a device, or is too large to be what it was named as."""


def read_plain_text(path: Path, limit_bytes: int, what: str, encoding: str = "utf-8", errors: str = "strict",
                    pipes: bool = True) -> str:
    """The text of ``path``; ``NotPlainFile`` (an ``OSError`` whose ``strerror`` says why) for a
    device or more than ``limit_bytes``, and for a pipe unless ``pipes`` (a file that something
    else reads again after this, as asyncssh reads an SSH config). Other ``OSError``s and
    ``UnicodeDecodeError`` pass through to the caller, which names the file its own way."""
    path = path.expanduser()
    mode = os.stat(path).st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        if os.path.realpath(path) == os.devnull:
            return ""
        raise NotPlainFile(0, "not a regular file (a pipe or device?)", str(path))
    if stat.S_ISFIFO(mode) and not pipes:
        raise NotPlainFile(0, "not a regular file (a pipe or device?)", str(path))
    if stat.S_ISFIFO(mode):  # opened without waiting for a writer: with none, it reads as empty
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        fh = os.fdopen(fd, "rb")
    else:
        fh = open(path, "rb")  # noqa: SIM115 (closed below)
    with fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise NotPlainFile(0, f"over {limit_bytes >> 20} MiB: not {what} (the wrong file given?)", str(path))
    return data.decode(encoding, errors)
