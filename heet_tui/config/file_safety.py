"""Files whose contents decide what runs as the user must be the user's alone.

A hosts file names the interpreter, working directory and SSH settings of every host; an SSH
config can name a ProxyCommand. Another local user able to write one runs code as you: with a
permissive umask (or a shared group), a ``python = "/tmp/evil.sh"`` added to the hosts file ran
as the controller's user at its next reload. OpenSSH refuses such a config ("Bad owner or
permissions"); so does heet-tui, for these files, with the same rule: owned by you (or root),
writable by nobody else (a group-writable file only when the group is your own primary group,
as with the user-private groups of a umask of 002).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def others_can_write(path: Path) -> str | None:
    """Why someone other than the user could change ``path`` (or swap it in its directory); None when nobody can."""
    try:
        st = path.stat()
    except OSError:
        return None  # missing or unreadable: the reader says so in its own words
    uid = os.getuid()
    if st.st_uid not in (uid, 0):
        return f"it is owned by uid {st.st_uid}, not by you"
    if st.st_mode & stat.S_IWOTH:
        return "every user can write it"
    if st.st_mode & stat.S_IWGRP and st.st_gid != os.getgid():
        return f"group {st.st_gid} can write it"
    try:
        parent = path.resolve().parent.stat()
    except OSError:
        return None
    if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX:
        return "every user can replace it (its directory is writable by all and not sticky)"
    return None


def refusal(path: Path, why: str) -> str:
    return (f"refused: {why}, and what it says runs as you (hosts' python, workdir, SSH settings); "
            f"make it yours alone: chmod go-w {path}")


def write_private(path: Path, text: str) -> None:
    """Write ``path`` whole, 0600, through a fresh name beside it (a predictable one was followed
    if someone planted a link there); a directory it makes for it is the user's alone, whatever
    the umask (``~/.config/heet-tui``)."""
    if not path.parent.exists():
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        path.parent.mkdir(mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
