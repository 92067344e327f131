"""A damaged state store is refused before the controller touches a host.

Opened on a store with one bad page, the controller auto-approved a plan it found there,
launched its jobs and only then failed ("database disk image is malformed"), leaving them
running with no store that knew them; ``heet-tui run`` ended in a traceback.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heet_tui.control.store import Store


def refuse_damaged(store: Store) -> None:
    """Raise ``StoreError`` saying what SQLite's quick check found (it reads every page once, so
    it runs at start only)."""
    from heet_tui.control.store import StoreError

    try:
        rows = store._db.execute("PRAGMA quick_check").fetchall()
        found = [str(r[0]) for r in rows if r[0] != "ok"]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found:
        aside = f"{store.dir}.damaged"
        raise StoreError(f"state store {store.path} is damaged ({'; '.join(found[:3])}): the controller does not "
                         f"start on it. Restore a copy, or move it aside (mv {store.dir} {aside}) to start afresh: "
                         "jobs still running are then another store's, left running and shown as such")
