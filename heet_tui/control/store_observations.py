"""Measured throughputs in the state store (part of ``Store``): a mixin like ``store_events``."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager

OBSERVATIONS_PER_CELL = 32  # per job, GPU type and placement: profiling.tensor.MAX_PER_CELL (not imported: numpy)

Observation = tuple[str, str, str, float, float, str]  # job, GPU type, placement, samples/s, at, source


class ObservationRows:
    _db: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def add_observation(self, job_id: str, gpu_type: str, placement: str, samples_per_s: float, at: float,
                        source: str = "run") -> None:
        with self._tx() as db:
            db.execute("INSERT INTO observations VALUES (?, ?, ?, ?, ?, ?)",
                       (job_id, gpu_type, placement, samples_per_s, at, source))
            # only a cell's latest rows are used; a running job adds one every 10 s, for months
            db.execute("DELETE FROM observations WHERE rowid IN (SELECT rowid FROM observations WHERE job_id = ? "
                       "AND gpu_type = ? AND placement = ? ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                       (job_id, gpu_type, placement, OBSERVATIONS_PER_CELL))

    def observations(self, job_id: str | None = None) -> list[Observation]:
        sql = "SELECT job_id, gpu_type, placement, samples_per_s, at, source FROM observations"
        rows = self._db.execute(sql + (" WHERE job_id = ?" if job_id else "") + " ORDER BY rowid",
                                (job_id,) if job_id else ())
        return [tuple(r) for r in rows]

    def latest_observation(self, job_id: str, source: str, since: float = -math.inf) -> Observation | None:
        """The job's newest measurement from ``source`` (made at ``since`` or later): one row, not its
        every cell's history."""
        row = self._db.execute("SELECT job_id, gpu_type, placement, samples_per_s, at, source FROM observations "
                               "WHERE job_id = ? AND source = ? AND at >= ? ORDER BY at DESC, rowid DESC LIMIT 1",
                               (job_id, source, since)).fetchone()
        return tuple(row) if row else None

    def forget_observations(self, gpu_type: str) -> int:
        """Drop every measurement on ``gpu_type`` (its GPUs changed speed); how many went."""
        with self._tx() as db:
            return db.execute("DELETE FROM observations WHERE gpu_type = ?", (gpu_type,)).rowcount
