"""A damaged state store is refused before the controller touches a host.

Opened on a store with one bad page, the controller auto-approved a plan it found there,
launched its jobs and only then failed ("database disk image is malformed"), leaving them
running with no store that knew them; ``heet-tui run`` ended in a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from heet_tui.control.store import Store


BEING_MADE_S = 10.0  # an empty store file younger than this is one another process is creating


def refuse_not_own(folder: Path) -> None:
    """Raise ``StoreError`` for a state directory someone else owns: they could swap what is in
    it (root's state.sqlite3 was made in a directory of uid nobody's, then chmodded private); or
    for a directory that is not a state directory (``refuse_foreign_folder``)."""
    from heet_tui.config.file_safety import planted_link, unsafe_ancestor
    from heet_tui.control.store import DB_NAME, StoreError

    if (link := planted_link(folder)) is not None:
        raise StoreError(f"state store {folder}: {link}; pass --state with a directory of your own")
    if (above := unsafe_ancestor(folder)) is not None:  # as a hosts file's or a workdir's: one could swap it
        raise StoreError(f"state store {folder}: {above[0]} above it {above[1]}, so another user could swap the "
                         "state (its plans are applied as you); pass --state with a directory of your own")
    if (owner := folder.stat().st_uid) != os.getuid():
        raise StoreError(f"state store {folder}: it is owned by uid {owner}, not by you; pass --state with a "
                         "directory of your own")
    refuse_foreign_folder(folder, folder / DB_NAME)


def refuse_foreign_folder(folder: Path, db: Path) -> None:
    """Raise ``StoreError`` for a directory not private yet that holds other files and no store:
    made private for the store, a team directory (``--state`` mistyped, or given as a parent) lost its group access
    and setgid bit without a word."""
    from heet_tui.control.store import StoreError

    if db.exists() or stat.S_IMODE(folder.stat().st_mode) == 0o700:  # private already: nothing would change
        return
    try:
        others = sorted(p.name for p in folder.iterdir() if not p.name.startswith(("state.sqlite3", "controller.")))
    except OSError:
        return
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise StoreError(f"state store {folder}: it holds other files ({shown}) and no state store; heet-tui makes "
                         "its state directory private (0700), so it takes only a new or empty one: pass --state "
                         f"with a directory of its own (e.g. {folder / 'heet-state'})")


def make_private(folder: Path, db: Path) -> None:
    """The state directory 0700 and its database 0600 (created if need be), changed only where they
    are not: on a read-only or immutable directory the chmod itself failed, with "Operation not
    permitted" and no word of why, even for `heet-tui jobs`."""
    from heet_tui.control.store import StoreError

    try:
        if stat.S_IMODE(folder.stat().st_mode) != 0o700:
            os.chmod(folder, 0o700)
        if not db.exists():  # an immutable store file is read as last written (open_as_last_written)
            os.close(os.open(db, os.O_CREAT | os.O_RDWR, 0o600))
        if stat.S_IMODE(db.stat().st_mode) != 0o600:
            os.chmod(db, 0o600)
    except OSError as exc:
        if exc.errno == errno.EROFS and db.exists():  # a read-only disk: read as last written (open_as_last_written)
            return
        if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
            raise
        raise StoreError(unwritable(folder, f"{exc.strerror}: {exc.filename}")) from None


def unwritable(folder: Path, why: str) -> str:
    return (f"state store {folder}: cannot write it ({why}): heet-tui writes its state directory even to read it "
            "(SQLite's write-ahead log); a read-only or immutable copy can be read by copying it to a writable "
            "place and passing --state")


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


def discard_unborn(store) -> None:
    """Remove a store file this process created and could not set up (its schema was never written):
    "empty (0 bytes): it was truncated ... restore a copy" then sent an admin looking for a backup
    of a store that never held anything."""
    db = getattr(store, "_db", None)
    if db is not None:
        with contextlib.suppress(sqlite3.Error):
            db.close()
    with contextlib.suppress(OSError):
        if store.path.stat().st_size != 0:  # some of it was written: kept, and opened as it is next time
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                store.path.with_name(store.path.name + suffix).unlink()


def open_as_last_written(db: Path, why: str) -> tuple[sqlite3.Connection, str] | None:
    """The store read as it was last written, when it cannot be opened to write (a full disk: SQLite
    could not make its write-ahead log beside it), and a reason for the refused writes.

    `jobs`, `status` and the TUI's hosts file all failed on "disk I/O error" exactly when a 3 a.m.
    admin needed them. Read without that log (immutable) only when no write-ahead log holds
    anything: what the file says is then all there is. None: not so, the caller says why it failed.
    """
    import shutil

    wal = db.with_name(db.name + "-wal")
    try:
        if wal.exists() and wal.stat().st_size > 0:
            return None
        free = shutil.disk_usage(db.parent).free
        read_only = bool(os.statvfs(db.parent).f_flag & os.ST_RDONLY)
        conn = sqlite3.connect(f"file:{quote(str(db))}?immutable=1", uri=True, isolation_level=None)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except (OSError, sqlite3.Error):
        return None
    full = "its disk is mounted read-only" if read_only else f"{free // 1024} KiB free on its disk" \
        if free < 1 << 20 else "its disk refuses writes"
    return conn, f"{why}; {full}: shown as last written, and nothing is changed until it takes writes"
