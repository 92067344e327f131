"""The state store's SQLite schema, as the migrations that build it.

A store written by an older heet-tui is upgraded in place when opened (``Store._migrate``),
so a running lab keeps its jobs and history across upgrades.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

# Each entry upgrades the schema by one version; never edit a released entry, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
        submitted_at REAL NOT NULL, restarts INTEGER NOT NULL DEFAULT 0, steps_done INTEGER NOT NULL DEFAULT 0,
        samples_done REAL NOT NULL DEFAULT 0, attained_gpu_s REAL NOT NULL DEFAULT 0,
        message TEXT NOT NULL DEFAULT '', checkpoint TEXT, generation INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0, crashes INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE job_states (job_id TEXT NOT NULL, at REAL NOT NULL, state TEXT NOT NULL, message TEXT);
    CREATE TABLE observations (job_id TEXT NOT NULL, gpu_type TEXT NOT NULL, placement TEXT NOT NULL,
        samples_per_s REAL NOT NULL, at REAL NOT NULL, source TEXT NOT NULL);
    CREATE TABLE plans (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at REAL NOT NULL, policy TEXT NOT NULL,
        status TEXT NOT NULL, plan TEXT NOT NULL, edits TEXT NOT NULL DEFAULT '{}', decided_at REAL);
    CREATE TABLE plan_steps (plan_id INTEGER NOT NULL, idx INTEGER NOT NULL, job_id TEXT NOT NULL,
        change TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending', started_at REAL, finished_at REAL,
        message TEXT NOT NULL DEFAULT '', PRIMARY KEY (plan_id, idx));
    CREATE TABLE allocations (job_id TEXT NOT NULL, generation INTEGER NOT NULL, allocation TEXT NOT NULL,
        started_at REAL NOT NULL, released_at REAL, PRIMARY KEY (job_id, generation));
    CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, kind TEXT NOT NULL,
        job_id TEXT, host TEXT, message TEXT NOT NULL);
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE INDEX job_states_job ON job_states(job_id);
    CREATE INDEX observations_job ON observations(job_id);
    CREATE INDEX events_job ON events(job_id);
    """,
    # 2: how long each job took to stop and to start (control/restart_costs.py); observations
    # thinned to each cell's latest 32 (Store.add_observation keeps it so from now on)
    """
    CREATE TABLE restart_times (job_id TEXT NOT NULL, at REAL NOT NULL, phase TEXT NOT NULL, seconds REAL NOT NULL);
    CREATE INDEX restart_times_job ON restart_times(job_id);
    DELETE FROM observations WHERE rowid IN (SELECT rowid FROM (SELECT rowid, ROW_NUMBER() OVER (
        PARTITION BY job_id, gpu_type, placement ORDER BY rowid DESC) AS n FROM observations) WHERE n > 32);
    """,
    # 3: the latest training metrics a job reported (loss, accuracy, ...: core/metrics.py), as JSON pairs
    """
    ALTER TABLE jobs ADD COLUMN metrics TEXT NOT NULL DEFAULT '[]';
    """,
    # 4: the furthest step a job reached, apart from where it is: a launch that resumed from an
    # older checkpoint shows its real step, while crashes still count until it passes the furthest
    """
    ALTER TABLE jobs ADD COLUMN furthest_steps INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET furthest_steps = steps_done;
    """,
    # 5: a job whose spec heet-tui update changed in what its processes were started with: the
    # controller relaunches it, also when it was not running at the time (control/job_update.py)
    """
    ALTER TABLE jobs ADD COLUMN relaunch_requested INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: the file a job's spec was last read from (submit, then update), which `u` on the Jobs
    # screen offers; older jobs take it from their submit event
    """
    ALTER TABLE jobs ADD COLUMN spec_file TEXT NOT NULL DEFAULT '';
    UPDATE jobs SET spec_file = COALESCE((SELECT substr(e.message, length('submitted ' || jobs.id || ' from ') + 1)
        FROM events e WHERE e.job_id = jobs.id AND e.kind = 'submit'
        AND e.message LIKE 'submitted ' || jobs.id || ' from %' ORDER BY e.id DESC LIMIT 1), '');
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def before_upgrade(db: sqlite3.Connection, state_dir: Path, path: Path, version: int) -> None:
    """Refuse to upgrade a store an older controller is running on, else keep a copy of it.

    A newer ``heet-tui status`` upgraded the store of a running older controller in passing:
    that controller's own commands were refused from then on ("newer than this heet-tui"), and
    nothing said why or kept the store it could read."""
    from heet_tui.control.snapshots import controller_running
    from heet_tui.control.store import StoreError

    holder = controller_running(state_dir)
    if holder is not None and holder != os.getpid():
        raise StoreError(f"{path} has schema version {version}, older than this heet-tui's ({SCHEMA_VERSION}), "
                         f"and the controller running on it (pid {holder}) is an older heet-tui: use that "
                         "heet-tui's commands, or stop its controller and start this one's, which upgrades the store")
    kept = path.with_name(f"{path.name}.schema-{version}")
    if not kept.exists():
        fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        copy = sqlite3.connect(kept)
        try:
            db.backup(copy)
        finally:
            copy.close()
