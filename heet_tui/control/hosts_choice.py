"""Which hosts file a command reads: the one given, else the one its state's controller last ran on.

Every command about a state (``run``, the TUI, ``status``, ``submit``, ``hosts ...``) asks here,
so that they agree: ``status`` listed a lab's hosts while ``run`` without ``--hosts`` started on the
default file, and ``hosts list --state lab`` showed a file that state never used.
"""

from __future__ import annotations

from pathlib import Path

from heet_tui.config.hosts_file import resolve_hosts_path
from heet_tui.control.store import DB_NAME, Store, StoreError

LAST_USED = "the file this state last ran on; --hosts picks another"


def last_hosts_file(state: Path) -> str | None:
    """The file the state's controller last ran on; None where there is no such state (none is made
    for asking) or it cannot be read."""
    if not (state / DB_NAME).is_file():
        return None
    try:
        store = Store(state)
    except StoreError:
        return None
    try:
        return store.setting("hosts_path")
    finally:
        store.close()


def chosen_hosts_path(explicit: str | None, state: Path) -> tuple[Path, str]:
    """The hosts file, and why, where the state's history chose it ("" otherwise)."""
    path = resolve_hosts_path(explicit, last_hosts_file(state))
    return path, LAST_USED if path != resolve_hosts_path(explicit) else ""
