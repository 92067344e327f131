"""Replacing a file whole or not at all: the job table, the agent's pid and owner, a job's exit
status, and checkpoints.

A writer that fails part-way (a full disk, a quota) leaves the old file as it was and takes its
partial copy with it: left behind, a half-written checkpoint of gigabytes kept the disk full for
the next save too. Python 3.8 syntax, like the rest of the agent bundle.
"""

import os

_FLAGS = {"wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
          "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def open_private(path, mode, **kwargs):
    """``open(path, mode)`` for writing, the file made 0600 when it is new: model weights and job
    logs took the umask (0644 readable by every user of the host) where their directory was not private."""
    return os.fdopen(os.open(path, _FLAGS[mode], 0o600), mode, **kwargs)


def atomic_write(path, write, sync=False):
    """``write(fh)`` to a file beside ``path`` (binary), then rename it over ``path``. ``sync``:
    flush it to disk first (a checkpoint must survive a crash of the host); raises OSError."""
    tmp = os.path.join(os.path.dirname(path), ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        with open_private(tmp, "wb") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path, text):
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
