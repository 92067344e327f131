"""A damaged state store is refused before the controller touches a host.

Opened on a store with one bad page, the controller auto-approved a plan it found there,
launched its jobs and only then failed ("database disk image is malformed"), leaving them
running with no store that knew them; ``heet-tui run`` ended in a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heet_tui.control.store import Store


BEING_MADE_S = 10.0  # an empty store file younger than this is one another process is creating


def refuse_not_own(folder: Path) -> None:
    """Raise ``StoreError`` for a state directory someone else owns: they could swap what is in
    it (root's state.sqlite3 was made in a directory of uid nobody's, then chmodded private)."""
    from heet_tui.control.store import StoreError

    if (owner := folder.stat().st_uid) != os.getuid():
        raise StoreError(f"state store {folder}: it is owned by uid {owner}, not by you; pass --state with a "
                         "directory of your own")


def refuse_emptied(path: Path) -> None:
    """Raise ``StoreError`` for a store file emptied to 0 bytes (a truncation, ``> state.db``).

    SQLite takes an empty file for a new database: every job, plan and measurement was gone without
    a word, and the jobs still running on the hosts, started under the old store's id, were shown as
    another store's. A store heet-tui made is never empty after its first moment."""
    from heet_tui.control.store import StoreError

    try:
        st = os.stat(path)
    except OSError:
        return  # a new store
    if st.st_size or time.time() - st.st_mtime < BEING_MADE_S:
        return
    raise StoreError(f"state store {path} is empty (0 bytes): it was truncated, and opening it would start a new "
                     "store in its place. Restore a copy of it, or remove it (rm) to start afresh: jobs still "
                     "running are then another store's, left running and shown as such")


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
        raise StoreError(damaged(store.path, "; ".join(found[:3]), "the controller does not start on it"))


def is_damage(exc: BaseException) -> bool:
    """SQLite's word for a file that is not (or no longer) a database: "malformed", "not a database".
    Its subclasses are other troubles (locked, disk I/O, a constraint)."""
    return type(exc) is sqlite3.DatabaseError


def damaged(path: Path, found: str, what: str = "heet-tui does not use it") -> str:
    """What to tell the user of a damaged store file, with the way out."""
    folder = Path(path).parent
    return (f"state store {path} is damaged ({found}): {what}. Restore a copy, or move it aside "
            f"(mv {folder} {folder}.damaged) to start afresh: jobs still running are then another store's, left "
            "running and shown as such")
