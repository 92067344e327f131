"""The event log and the settings of the state store (part of ``Store``).

A mixin like ``store_plans``: one object, one connection, one transaction rule, with the
append-only rows kept apart from the job rows.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from heet_tui.control.store_records import EventRecord
from heet_tui.core.escaped import escaped

# A running controller's log file (log_file.py) takes these at INFO: the help and the docs send
# a user to controller.log for what the controller did and why, and it held only start, stop
# and errors. Elsewhere (the CLI) nothing shows them: INFO is below what Python prints unasked.
events_log = logging.getLogger("heet_tui.events")
# The newest events kept (tens of MB): a busy lab adds one a second, and the table only grew.
# Pruned every PRUNE_EVERY inserts, by id, so an insert stays cheap.
KEEP_EVENTS = 200_000
PRUNE_EVERY = 1000


class EventRows:
    _db: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _store_id: str | None
    _logged_here: set[int] | None = None  # ids of events this process wrote, once log_others_events runs
    _others_from = 0  # the last event id log_others_events has seen

    def add_event(self, at: float, kind: str, message: str, job_id: str | None = None,
                  host: str | None = None) -> None:
        # a submitted file's name, a spec's script path: shown by the TUI and `tail -f controller.log`,
        # their escape sequences retitled the terminal
        message = escaped(message)
        # first: a store that cannot take it leaves it in the log; its job named ("failed: rank 0 on la1
        # ended with exit code 2" named none, and grep of the job in controller.log missed its failure)
        events_log.info("%s: %s", kind, job_named(job_id, message))
        with self._tx() as db:
            row = db.execute("INSERT INTO events (at, kind, job_id, host, message) VALUES (?, ?, ?, ?, ?)",
                             (at, kind, job_id, host, message)).lastrowid or 0
            if row % PRUNE_EVERY == 0 and row > KEEP_EVENTS:
                db.execute("DELETE FROM events WHERE id <= ?", (row - KEEP_EVENTS,))
        if self._logged_here is not None:
            self._logged_here.add(row)

    def log_others_events(self) -> None:
        """Put in this process's log the events other processes wrote since the last call: the
        controller's log said "every event" and held none of `heet-tui submit`, `cancel` or `retry`
        (each logged in its own short-lived process, where no log file listens). The first call
        only marks where to start."""
        mine = self._logged_here
        if mine is None:
            self._logged_here = set()
            self._others_from = self._db.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]
            return
        rows = self._db.execute("SELECT id, at, kind, job_id, host, message FROM events WHERE id > ? ORDER BY id",
                                (self._others_from,)).fetchall()
        for r in rows:
            if r[0] not in mine:
                events_log.info("%s: %s (from another heet-tui command)", r[2], job_named(r[3], escaped(r[5] or "")))
            mine.discard(r[0])
        if rows:
            self._others_from = rows[-1][0]

    def events(self, job_id: str | None = None, limit: int = 50) -> list[EventRecord]:
        where = " WHERE job_id = ?" if job_id else ""
        rows = self._db.execute(f"SELECT id, at, kind, job_id, host, message FROM events{where} "
                                "ORDER BY id DESC LIMIT ?", ((job_id,) if job_id else ()) + (limit,))
        # escaped on the way out too: an older heet-tui stored them raw, and a file name's escape
        # sequence written then retitled the terminal of the TUI that showed it after the upgrade
        return [EventRecord(*r[:4], escaped(r[4]) if r[4] else r[4], escaped(r[5] or "")) for r in reversed(rows.fetchall())]

    def event_count(self, job_id: str) -> int:
        """How many events a job has, so a listing of its latest can say what it left out."""
        return self._db.execute("SELECT COUNT(*) FROM events WHERE job_id = ?", (job_id,)).fetchone()[0]

    @property
    def store_id(self) -> str:
        """A random id made once per state directory: the agents mark each job's checkpoint
        directory with it, so another store's job (another user, or this one started afresh)
        cannot resume from checkpoints that are not its own."""
        if self._store_id is None:
            with self._tx() as db:
                row = db.execute("SELECT value FROM settings WHERE key = 'store_id'").fetchone()
                self._store_id = row[0] if row else uuid.uuid4().hex
                if not row:
                    db.execute("INSERT INTO settings VALUES ('store_id', ?)", (self._store_id,))
        return self._store_id

    def setting(self, key: str, default: str | None = None) -> str | None:
        row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_setting(self, key: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO settings VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                       (key, value))


def job_named(job_id: str | None, text: str) -> str:
    """``text`` led by its job's id where it does not name the job already (as a name of its own:
    job "loc" is not named by host "loc-a")."""
    if not job_id or re.search(rf"(?<![\w.-]){re.escape(job_id)}(?![\w.-])", text):
        return text
    return f"{job_id}: {text}"
