"""Replacing a file whole or not at all: the job table, the agent's pid and owner, a job's exit
status, and checkpoints.

A writer that fails part-way (a full disk, a quota) leaves the old file as it was and takes its
partial copy with it: left behind, a half-written checkpoint of gigabytes kept the disk full for
the next save too. Python 3.8 syntax, like the rest of the agent bundle.
"""

import os


def atomic_write(path, write, sync=False):
    """``write(fh)`` to a file beside ``path`` (binary), then rename it over ``path``. ``sync``:
    flush it to disk first (a checkpoint must survive a crash of the host); raises OSError."""
    tmp = os.path.join(os.path.dirname(path), ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb") as fh:
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
