"""Reading a file a user named, when it may be anything: a device, a pipe, a huge file.

`ssh_config = "/dev/zero"` (or an `Include` of it) and `sim --workload /dev/zero` read until
memory ran out (10 GB in 9 s on a shared login node); a named pipe hung with no word. The
hosts-file and job-spec readers refused those already (``errors.read_config_file``).
"""

from __future__ import annotations

from pathlib import Path


class NotPlainFile(OSError):
    """The path is not a regular file, or is too large to be what it was named as."""


def read_plain_text(path: Path, limit_bytes: int, what: str, encoding: str = "utf-8", errors: str = "strict") -> str:
    """The text of ``path``; ``NotPlainFile`` (an ``OSError`` whose ``strerror`` says why) for a
    device, a pipe or a file over ``limit_bytes``. Other ``OSError``s and ``UnicodeDecodeError``
    pass through to the caller, which names the file its own way."""
    path = path.expanduser()
    if path.exists() and not path.is_dir() and not path.is_file():
        raise NotPlainFile(0, "not a regular file (a pipe or device?)", str(path))
    with open(path, "rb") as fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise NotPlainFile(0, f"over {limit_bytes >> 20} MiB: not {what} (the wrong file given?)", str(path))
    return data.decode(encoding, errors)
