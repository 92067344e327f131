"""Where each job's runs were placed, generation by generation (part of ``Store``): a mixin like
``store_events``. A finished job's GPU types and hosts were in event text only."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from heet_tui.control.codec import alloc_from_obj, alloc_to_obj, spec_from_json
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec


@dataclass(frozen=True, slots=True)
class Placed:
    """One generation's allocation, from its launch until its GPUs were released (None: it holds them)."""

    allocation: Allocation
    generation: int
    started_at: float
    released_at: float | None


class AllocationRows:
    _db: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def record_allocation(self, alloc: Allocation, generation: int, at: float, spec: JobSpec | None = None) -> None:
        """``spec``: what the launch was built from, which carries out an update's relaunch to it."""
        with self._tx() as db:
            db.execute("UPDATE allocations SET released_at = ? WHERE job_id = ? AND released_at IS NULL",
                       (at, alloc.job_id))
            db.execute("INSERT INTO allocations VALUES (?, ?, ?, ?, NULL)",
                       (alloc.job_id, generation, json.dumps(alloc_to_obj(alloc)), at))
            row = spec and db.execute("SELECT spec FROM jobs WHERE id = ?", (alloc.job_id,)).fetchone()
            if row and spec_from_json(row[0]) == spec:
                db.execute("UPDATE jobs SET relaunch_requested = 0 WHERE id = ?", (alloc.job_id,))

    def release_allocation(self, job_id: str, at: float) -> None:
        with self._tx() as db:
            db.execute("UPDATE allocations SET released_at = ? WHERE job_id = ? AND released_at IS NULL",
                       (at, job_id))

    def current_allocations(self) -> dict[str, tuple[Allocation, int]]:
        rows = self._db.execute("SELECT job_id, allocation, generation FROM allocations WHERE released_at IS NULL")
        out: dict[str, tuple[Allocation, int]] = {}
        for job_id, text, gen in rows:
            alloc = alloc_from_obj(json.loads(text))
            if alloc is not None:
                out[job_id] = (alloc, gen)
        return out

    def current_starts(self) -> dict[str, float]:
        """When each job's current allocation began: what it runs at now is what it measured since."""
        rows = self._db.execute("SELECT job_id, started_at FROM allocations WHERE released_at IS NULL")
        return {job_id: float(at) for job_id, at in rows}

    def last_allocation(self, job_id: str, generation: int | None = None) -> tuple[Allocation, int] | None:
        """The job's latest allocation (or ``generation``'s) and its generation, released or not (where its log is)."""
        row = self._db.execute("SELECT allocation, generation FROM allocations WHERE job_id = ? AND generation = "
                               "COALESCE(?, generation) ORDER BY generation DESC LIMIT 1", (job_id, generation)).fetchone()
        alloc = alloc_from_obj(json.loads(row[0])) if row else None
        return (alloc, int(row[1])) if alloc is not None else None

    def allocation_history(self, job_id: str) -> list[Placed]:
        """Every generation's allocation of the job, oldest first."""
        rows = self._db.execute("SELECT allocation, generation, started_at, released_at FROM allocations "
                                "WHERE job_id = ? ORDER BY generation", (job_id,))
        return [Placed(alloc, int(gen), float(start), None if end is None else float(end))
                for text, gen, start, end in rows if (alloc := alloc_from_obj(json.loads(text))) is not None]

    def held_gpu_seconds(self, now: float, job_id: str | None = None) -> dict[str, float]:
        """Per job, GPUs x seconds its runs held them, launch to release (still held: to ``now``):
        what a lab bills by. The GPU time jobs report training leaves out start-up, the first
        report's interval, checkpoints and stops (27-83 % of this in a lab of small jobs).
        ``job_id``: that job's alone (``jobs NAME`` read the whole table for one job)."""
        held: dict[str, float] = {}
        rows = self._db.execute("SELECT job_id, allocation, started_at, released_at FROM allocations"
                                + (" WHERE job_id = ?" if job_id is not None else ""), (job_id,) if job_id else ())
        for job, text, start, end in rows:
            if (alloc := alloc_from_obj(json.loads(text))) is not None:
                span = max(0.0, (now if end is None else float(end)) - float(start))
                held[job] = held.get(job, 0.0) + span * alloc.num_gpus
        return held
