"""The controller's durable state: one SQLite file shared by the controller and the CLI.

Why SQLite in WAL mode: ``heet-tui submit`` and ``heet-tui cancel`` write while a running
controller reads, and a controller that is killed must find every job, plan step and launch
generation again on restart. Every write is one short ``BEGIN IMMEDIATE`` transaction and the
connection waits (busy timeout) instead of failing when another process holds the lock.
The file is private to the user (dir 0700, file 0600): it holds commands and paths.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import replace
from itertools import chain, count
from pathlib import Path

from heet_tui.config.file_safety import make_private_dirs
from heet_tui.control import checkpoint_dirs
from heet_tui.control.checkpoint_dirs import CheckpointDirInUse, CheckpointUser
from heet_tui.control.codec import (
    metrics_from_json,
    spec_from_json,
    spec_to_json,
)
from heet_tui.control.store_allocations import AllocationRows
from heet_tui.control.store_events import EventRows
from heet_tui.control.store_integrity import (
    damaged,
    discard_unborn,
    is_damage,
    make_private,
    open_as_last_written,
    refuse_emptied,
    refuse_not_own,
    unwritable,
)
from heet_tui.control.store_observations import ObservationRows
from heet_tui.control.store_plans import PlanRows
from heet_tui.control.store_records import JobRecord
from heet_tui.control.store_schema import MIGRATIONS, SCHEMA_VERSION, before_upgrade
from heet_tui.core.escaped import escaped
from heet_tui.core.job import InvalidTransition, Job, JobSpec, JobState
from heet_tui.core.metrics import Metrics, merged

DB_NAME = "state.sqlite3"
BUSY_TIMEOUT_S = 15.0

_TERMINAL = tuple(s.value for s in JobState if s.terminal)
_TERMINAL_MARKS = ", ".join("?" * len(_TERMINAL))  # SQL placeholders for _TERMINAL


class StoreError(RuntimeError):
    """The state file cannot be used (newer schema, unreadable, locked for too long)."""


class StoreWriteError(StoreError):
    """A write failed for a reason outside heet-tui (disk full, read-only or failing disk, a lock
    held too long); what was being written is not recorded."""


_CANNOT_WRITE = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN",
                 "SQLITE_PERM")


def cannot_write(exc: sqlite3.Error) -> bool:
    """The environment refused a write, as opposed to a mistake in heet-tui's own SQL."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return any(name == code or name.startswith(code + "_") for code in _CANNOT_WRITE)


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "heet-tui"


class Store(PlanRows, EventRows, ObservationRows, AllocationRows):
    def __init__(self, state_dir: Path | str | None = None) -> None:
        self.dir = Path(state_dir).expanduser() if state_dir else default_state_dir()
        self._store_id: str | None = None
        if self.dir.exists() and not self.dir.is_dir():
            raise StoreError(f"state store {self.dir}: is not a directory (--state names a directory)")
        self.path = self.dir / DB_NAME
        fresh = False
        try:
            make_private_dirs(self.dir)
            refuse_not_own(self.dir)
            refuse_emptied(self.path)
            fresh = not self.path.exists()
            make_private(self.dir, self.path)
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # the log was left at its largest (4 MB for a store of 100 KB): the headroom it took filled a
            # small disk by itself; checkpointed every 1 MB and cut back to that after
            self._db.execute("PRAGMA wal_autocheckpoint=256")
            self._db.execute(f"PRAGMA journal_size_limit={1 << 20}")
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            if fresh:  # never set up (a full disk): left empty, it was then refused as a truncated store
                discard_unborn(self)
            elif isinstance(exc, sqlite3.Error) and cannot_write(exc) and not is_damage(exc) \
                    and (last := open_as_last_written(self.path, str(exc))) is not None:
                self._db, self.read_only_why = last
                if self.schema_version == SCHEMA_VERSION:
                    return
                self._db.close()  # an older schema must be upgraded first, which writes
            said = damaged(self.path, str(exc)) if is_damage(exc) else unwritable(self.dir, str(exc)) \
                if "unable to open database file" in str(exc) else f"state store {self.dir}: {exc}"
            raise StoreError(said) from None

    read_only_why = ""  # why writes are refused: the store was opened as last written (a full disk)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        if self._db.in_transaction:  # within batch(): the outer transaction commits or rolls back
            yield self._db
            return
        if self.read_only_why:
            raise StoreWriteError(f"state store {self.dir}: cannot write ({self.read_only_why})")
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            if not cannot_write(exc):
                raise
            with suppress(sqlite3.Error):  # a failed COMMIT may leave the transaction open
                self._db.execute("ROLLBACK")
            raise StoreWriteError(f"state store {self.dir}: cannot write ({exc})") from None

    def batch(self) -> AbstractContextManager[sqlite3.Connection]:
        """The writes within, all or none: a run's end (its allocation released, its event, its
        new state) half written when the disk filled left a job neither running nor ended."""
        return self._tx()

    def _migrate(self) -> None:
        """Bring the schema up to date. A store already up to date is only read: ``heet-tui jobs``,
        ``status`` and ``log`` must still work when the disk is full or another process holds
        the write lock, which is when a user most needs to see what is going on."""
        if self.schema_version == SCHEMA_VERSION:
            return
        if 0 < self.schema_version < SCHEMA_VERSION:  # an empty store is being made, not upgraded
            before_upgrade(self._db, self.dir, self.path, self.schema_version)
        with self._tx() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {version}, newer than this heet-tui "
                                 f"({SCHEMA_VERSION}); upgrade heet-tui")
            for script in MIGRATIONS[version:]:
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # -- jobs -------------------------------------------------------------------------------
    def add_job(self, spec: JobSpec, now: float) -> Job:
        """Insert a queued job; its id is the spec name, suffixed when that name was used before."""
        return self.add_jobs([spec], now)[0]

    def add_jobs(self, specs: Sequence[JobSpec], now: float, spec_files: Sequence[str] = ()) -> list[Job]:
        """All or, when one is refused (:class:`CheckpointDirInUse` with its ``index``), none: a
        sweep whose third spec reuses a checkpoint directory was left two thirds queued.
        ``spec_files``: the file each spec was read from, the one ``heet-tui update`` reads again."""
        jobs = []
        files = list(spec_files) + [""] * (len(specs) - len(spec_files))
        with self._tx() as db:
            # Every id counts, not only this name's: a job may be named "train-2" by hand.
            taken = {r[0] for r in db.execute("SELECT id FROM jobs")}
            for index, spec in enumerate(specs):
                try:
                    checkpoint_dirs.refuse_twin(spec, [j.spec for j in jobs])
                    checkpoint_dirs.refuse_shared(spec, _checkpoint_users(db, spec.checkpoint_dir))
                except CheckpointDirInUse as exc:
                    raise CheckpointDirInUse(str(exc), index) from None
                job_id = next(i for i in chain([spec.name], (f"{spec.name}-{n}" for n in count(2))) if i not in taken)
                taken.add(job_id)
                at = now + index * 1e-6  # jobs are ordered by submission time: keep the order given
                db.execute("INSERT INTO jobs (id, name, spec, state, submitted_at, spec_file) VALUES (?, ?, ?, ?, ?, ?)",
                           (job_id, spec.name, spec_to_json(spec), JobState.QUEUED.value, at, files[index]))
                db.execute("INSERT INTO job_states VALUES (?, ?, ?, ?)",
                           (job_id, at, JobState.QUEUED.value, "submitted"))
                jobs.append(Job(job_id, spec, JobState.QUEUED, at, history=((at, JobState.QUEUED),)))
        return jobs

    def checkpoint_users(self, checkpoint_dir: str) -> list[CheckpointUser]:
        """The jobs whose spec names this checkpoint directory, oldest first."""
        return _checkpoint_users(self._db, checkpoint_dir)

    def jobs(self, include_terminal: bool = True, ended: int | None = None) -> list[JobRecord]:
        """Oldest first; ``ended`` keeps only the latest ``ended`` of the jobs that ended (by when
        they ended: a long job submitted first and ended today was left out behind a hundred
        short ones submitted after it).

        The controller asks for the active ones several times a round and a lab's store holds
        thousands of ended jobs: they are filtered in SQL, and histories come in one query (one
        per job took 0.25 s a call at 5,000 jobs).
        """
        marks = _TERMINAL_MARKS
        where, params = "", ()
        if not include_terminal:
            where, params = f" WHERE state NOT IN ({marks})", _TERMINAL
        elif ended is not None:
            where = (f" WHERE state NOT IN ({marks}) OR id IN (SELECT s.job_id FROM job_states s JOIN jobs j ON "
                     f"j.id = s.job_id WHERE j.state IN ({marks}) AND s.state IN ({marks}) GROUP BY s.job_id "
                     "ORDER BY MAX(s.at) DESC, j.submitted_at DESC, j.id DESC LIMIT ?)")
            params = (*_TERMINAL, *_TERMINAL, *_TERMINAL, ended)
        cur = self._db.execute(f"SELECT * FROM jobs{where} ORDER BY submitted_at, id", params)
        cols = [c[0] for c in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
        histories: dict[str, list[tuple[float, JobState]]] = {}
        subset = f" WHERE job_id IN (SELECT id FROM jobs{where})" if where else ""
        for job_id, at, state in self._db.execute(f"SELECT job_id, at, state FROM job_states{subset} ORDER BY rowid",
                                                  params):
            histories.setdefault(job_id, []).append((at, JobState(state)))
        return [self._job_record(r, tuple(histories.get(r["id"], ()))) for r in rows]

    def state_counts(self) -> dict[str, int]:
        return {state: n for state, n in self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")}

    def job(self, job_id: str) -> JobRecord | None:
        cur = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,))
        row = cur.fetchone()
        return self._job_record(dict(zip([c[0] for c in cur.description], row, strict=True))) if row else None

    def find_job(self, name: str, states: Collection[JobState] | None = None,
                 by_id: bool = True) -> JobRecord | None:
        """By id, else the newest job with that name (what ``heet-tui cancel NAME`` means); with
        ``states`` (those the action acts on), the newest of that name in one of them. A job found
        by id in another state gives way only to one of its name submitted after it ended (the
        same spec submitted again: ``cancel small-cnn`` stopped nothing when small-cnn had
        finished and small-cnn-4 ran). Any other sibling gave way too: a cancel run twice stopped
        one the second time, and a retry of a running job restarted a cancelled one from scratch
        (the callers now say which sibling would fit). ``by_id=False``: by name alone (a spec
        file names its job by name: the first job's id is its name too, and won over the newer
        ones)."""
        by_id = self.job(name) if by_id else None
        if by_id is not None and (states is None or by_id.job.state in states):
            return by_id
        same = [r for r in self.jobs() if r.job.spec.name == name]
        wanted = [r for r in same if states is None or r.job.state in states]
        if by_id is not None:
            ended = by_id.job.ended_at
            wanted = [r for r in wanted if ended is not None and r.job.submitted_at > ended]
            return wanted[-1] if wanted else by_id
        return wanted[-1] if wanted else (same[-1] if same else None)

    def _job_record(self, r: dict, history: tuple[tuple[float, JobState], ...] | None = None) -> JobRecord:
        if history is None:
            history = tuple((at, JobState(s)) for at, s in self._db.execute(
                "SELECT at, state FROM job_states WHERE job_id = ? ORDER BY rowid", (r["id"],)))
        job = Job(r["id"], spec_from_json(r["spec"]), JobState(r["state"]), r["submitted_at"], r["restarts"],
                  r["samples_done"], r["steps_done"], r["attained_gpu_s"], escaped(r["message"] or ""), history,
                  metrics_from_json(r["metrics"]))
        return JobRecord(job, r["checkpoint"], r["generation"], bool(r["cancel_requested"]), r["crashes"],
                         bool(r["relaunch_requested"]), r["spec_file"])

    def set_state(self, job_id: str, new: JobState, at: float, message: str = "") -> Job:
        """Move a job along its life cycle; refuses transitions the life cycle forbids."""
        message = escaped(message)  # a spec's paths, as events' are: shown by `jobs`, the TUI and the log
        with self._tx():
            rec = self.job(job_id)
            if rec is None:
                raise KeyError(job_id)
            if rec.job.state is new:
                self._db.execute("UPDATE jobs SET message = ? WHERE id = ?", (message, job_id))
                return replace(rec.job, message=message)
            job = rec.job.transition(new, at, message)
            self._db.execute("UPDATE jobs SET state = ?, restarts = ?, message = ? WHERE id = ?",
                             (new.value, job.restarts, message, job_id))
            self._db.execute("INSERT INTO job_states VALUES (?, ?, ?, ?)", (job_id, at, new.value, message))
        return job

    def retry(self, job_id: str, at: float, message: str) -> Job:
        """A failed or cancelled job queued again with its progress and checkpoint, its crash
        count and cancel request cleared. Refused when another live job now names its
        checkpoint directory (both would write there)."""
        with self._tx() as db:
            rec = self.job(job_id)
            if rec is None:
                raise KeyError(job_id)
            job = rec.job.retried(at, message)
            users = [u for u in _checkpoint_users(db, job.spec.checkpoint_dir) if u.job_id != job_id]
            if live := [u.job_id for u in users if not u.state.terminal]:
                raise CheckpointDirInUse(f"checkpoint_dir {job.spec.checkpoint_dir!r} is in use by job {live[0]}")
            db.execute("UPDATE jobs SET state = ?, message = ?, crashes = 0, cancel_requested = 0 WHERE id = ?",
                       (JobState.QUEUED.value, message, job_id))
            db.execute("INSERT INTO job_states VALUES (?, ?, ?, ?)", (job_id, at, JobState.QUEUED.value, message))
        return job

    def try_set_state(self, job_id: str, new: JobState, at: float, message: str = "") -> bool:
        try:
            self.set_state(job_id, new, at, message)
            return True
        except InvalidTransition:
            return False

    def update_progress(self, job_id: str, steps: int, samples: float, checkpoint: str | None,
                        gpu_seconds: float = 0.0, clear_crashes: bool = False, metrics: Metrics = (),
                        current: bool = False) -> None:
        """``clear_crashes``: the crash count restarts when ``steps`` is past the furthest step the
        job had reported (new ground), so a job that crashes at one step after every resume fails.
        ``current``: the running launch's own report, kept even below what the job had (it resumed
        from an older checkpoint: its remaining work is what it has left now); otherwise the
        larger of the two stays. One statement, and a read of the kept metrics when the line has
        any: it runs on every progress report (SET expressions read the old row).

        ``metrics`` are merged into the job's by name (``core.metrics.merged``), the newer value
        winning, across its launches too: a relaunch, a resize or a retry resumes the same training
        from its checkpoint, so the latest value seen of each stays the job's until a line reports
        it again (a job submitted again is a new job, with none)."""
        with self._tx() as db:
            if metrics:
                row = db.execute("SELECT metrics FROM jobs WHERE id = ?", (job_id,)).fetchone()
                metrics = merged(metrics_from_json(row[0]) if row else (), metrics)
            # never lowers a done job's (a cut-off copy finished it; the newer run, stopped, reports less)
            db.execute("UPDATE jobs SET steps_done = CASE WHEN ? AND state != 'done' THEN ? ELSE MAX(steps_done, ?) "
                       "END, samples_done = CASE WHEN ? AND state != 'done' THEN ? ELSE MAX(samples_done, ?) END, "
                       "furthest_steps = MAX(furthest_steps, ?), "
                       "checkpoint = COALESCE(?, checkpoint), attained_gpu_s = attained_gpu_s + ?, "
                       "crashes = CASE WHEN ? AND ? > furthest_steps THEN 0 ELSE crashes END, "
                       "metrics = COALESCE(?, metrics) WHERE id = ?",
                       (current, steps, steps, current, samples, samples, steps, checkpoint, gpu_seconds,
                        clear_crashes, steps, json.dumps(metrics) if metrics else None, job_id))

    def replace_spec(self, job_id: str, spec: JobSpec, relaunch: bool, spec_file: str = "") -> None:
        """``heet-tui update``; ``relaunch``: its processes must restart to take it, which the
        controller does at its next round, or when it next starts (job_update.py)."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET spec = ?, relaunch_requested = MAX(relaunch_requested, ?), "
                       "spec_file = CASE WHEN ? = '' THEN spec_file ELSE ? END WHERE id = ?",
                       (spec_to_json(spec), relaunch, spec_file, spec_file, job_id))

    def request_cancel(self, job_id: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))

    def next_generation(self, job_id: str, past: int = 0) -> int:
        """A fresh, never reused launch generation for the job (the fence for stale copies), above ``past``."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET generation = MAX(generation, ?) + 1 WHERE id = ?", (past, job_id))
            return int(db.execute("SELECT generation FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])

    def forgive_crash(self, job_id: str) -> None:
        """A crash that was the host's fault (control/host_health.py) does not use up a retry."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET crashes = MAX(0, crashes - 1) WHERE id = ?", (job_id,))

    def count_crash(self, job_id: str) -> int:
        with self._tx() as db:
            db.execute("UPDATE jobs SET crashes = crashes + 1 WHERE id = ?", (job_id,))
            return int(db.execute("SELECT crashes FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])

    # -- restart times ----------------------------------------------------------------------
    def add_restart_time(self, job_id: str, phase: str, seconds: float, at: float) -> None:
        """``phase`` "start" (launch to training at speed) or "stop" (SIGTERM to exit)."""
        with self._tx() as db:
            db.execute("INSERT INTO restart_times VALUES (?, ?, ?, ?)", (job_id, at, phase, seconds))

    def restart_times(self) -> list[tuple[str, str, float]]:
        """(job id, phase, seconds) of the jobs that have not ended, oldest first."""
        rows = self._db.execute("SELECT job_id, phase, seconds FROM restart_times WHERE job_id IN (SELECT id FROM "
                                f"jobs WHERE state NOT IN ({_TERMINAL_MARKS})) ORDER BY rowid",
                                _TERMINAL)
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    def ended_restart_times(self, rows: int) -> list[tuple[str, str, int, str, float]]:
        """(job id, model, batch size, phase, seconds) of the latest ``rows`` measurements of jobs
        that have ended, oldest first: what a sweep's later twins pause, once the first have finished."""
        found = self._db.execute(
            "SELECT r.job_id, json_extract(j.spec, '$.model'), json_extract(j.spec, '$.batch_size'), r.phase, "
            f"r.seconds FROM restart_times r JOIN jobs j ON j.id = r.job_id WHERE j.state IN ({_TERMINAL_MARKS}) "
            "ORDER BY r.rowid DESC LIMIT ?", (*_TERMINAL, rows))
        return [(str(r[0]), str(r[1]), int(r[2]), str(r[3]), float(r[4])) for r in reversed(found.fetchall())]


def _checkpoint_users(db: sqlite3.Connection, checkpoint_dir: str | None) -> list[CheckpointUser]:
    if not checkpoint_dir:
        return []
    rows = db.execute("SELECT id, state, samples_done, spec FROM jobs ORDER BY submitted_at, id")
    return [CheckpointUser(job_id, JobState(state), float(done or 0)) for job_id, state, done, spec in rows
            if checkpoint_dirs.same_dir(checkpoint_dir, spec_from_json(spec).checkpoint_dir)]
