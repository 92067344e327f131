"""Which hosts file a command reads: the one given, else the one its state's controller last ran on.

Every command about a state (``run``, the TUI, ``status``, ``submit``, ``hosts ...``) asks here,
so that they agree: ``status`` listed a lab's hosts while ``run`` without ``--hosts`` started on the
default file, and ``hosts list --state lab`` showed a file that state never used.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import resolve_hosts_path
from heet_tui.control.store import DB_NAME

LAST_USED = "the file this state last ran on; --hosts picks another"


def last_hosts_file(state: Path) -> str | None:
    """The file the state's controller last ran on; None where there is no such state (none is made
    for asking) or it cannot be read. Read through a read-only connection of its own: a full
    Store opened and closed here, before the command's own, left that process's later writes
    unseen by a controller of the same state in another process (its close took the WAL away)."""
    path = state / DB_NAME
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT value FROM settings WHERE key = ?", ("hosts_path",)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return row[0] if row and isinstance(row[0], str) else None


def chosen_hosts_path(explicit: str | None, state: Path) -> tuple[Path, str]:
    """The hosts file, and why, where the state's history chose it ("" otherwise). A state's file
    that is gone is an error (``ConfigError``), not a reason to take the default one: a file on
    NFS away for a moment when cron ran ``run`` moved the lab's queue to the bundled local hosts,
    unsaid, and that run made the local file the one the state remembered."""
    path = resolve_hosts_path(explicit, last_hosts_file(state))
    why = LAST_USED if path != resolve_hosts_path(explicit) else ""
    if why:
        gone_error(path, state)
    return path, why


def gone_error(path: Path, state: Path) -> None:
    """Raise the error for a state's hosts file that is not there (nothing when it is)."""
    if not path.is_file():
        raise ConfigError(path, f"not found (looked for {path}): it is the hosts file {state} last ran on; "
                          "restore it, or give --hosts FILE (or $HEET_HOSTS) to use another")
