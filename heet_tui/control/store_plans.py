"""The plans a controller proposed and the steps of those it applies (part of ``Store``).

A mixin, so the store stays one object with one connection and one transaction rule, and its
plan rows sit apart from its job rows.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager

from heet_tui.control.codec import change_from_json, change_to_json, plan_from_json, plan_to_json
from heet_tui.control.store_records import PlanRecord, StepRecord
from heet_tui.core.plan import Change, Plan

log = logging.getLogger(__name__)
PLAN_STATUSES = ("proposed", "approved", "rejected", "applying", "applied", "superseded", "failed")
# Superseded plans kept (the newest): nobody approves one, and at lab scale each is tens of KB
# (a store grew by 180 MB an hour of plans replacing each other).
KEEP_SUPERSEDED = 50


class PlanRows:
    _db: sqlite3.Connection
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def add_plan(self, plan: Plan, status: str = "proposed") -> int:
        with self._tx() as db:
            db.execute("UPDATE plans SET status = 'superseded' WHERE status = 'proposed'")
            db.execute("DELETE FROM plans WHERE status = 'superseded' AND id < (SELECT id FROM plans WHERE "
                       "status = 'superseded' ORDER BY id DESC LIMIT 1 OFFSET ?)", (KEEP_SUPERSEDED - 1,))
            cur = db.execute("INSERT INTO plans (created_at, policy, status, plan) VALUES (?, ?, ?, ?)",
                             (plan.created_at, plan.policy, status, plan_to_json(plan)))
        plan_id = int(cur.lastrowid or 0)
        log.info("plan #%d %s by %s: %d change(s)", plan_id, status, plan.policy, len(plan.changes))  # controller.log
        return plan_id

    def refresh_proposed_plan(self, plan_id: int, plan: Plan) -> None:
        """The pending plan's predictions made again for the same moves, under the same id (an
        approval in flight still names it)."""
        with self._tx() as db:
            db.execute("UPDATE plans SET plan = ? WHERE id = ? AND status = 'proposed'", (plan_to_json(plan), plan_id))

    def plan(self, plan_id: int) -> PlanRecord | None:
        row = self._db.execute("SELECT id, plan, status, edits, created_at FROM plans WHERE id = ?",
                               (plan_id,)).fetchone()
        return PlanRecord(row[0], plan_from_json(row[1]), row[2], json.loads(row[3]), row[4]) if row else None

    def plans_with_status(self, *statuses: str) -> list[PlanRecord]:
        marks = ",".join("?" * len(statuses))
        ids = self._db.execute(f"SELECT id FROM plans WHERE status IN ({marks}) ORDER BY id", statuses)
        return [p for (i,) in ids.fetchall() if (p := self.plan(i)) is not None]

    def latest_plan_id(self, *statuses: str) -> int | None:
        """The newest plan in one of ``statuses``, without decoding any."""
        marks = ",".join("?" * len(statuses))
        return self._db.execute(f"SELECT MAX(id) FROM plans WHERE status IN ({marks})", statuses).fetchone()[0]

    def set_plan_status(self, plan_id: int, status: str, at: float, plan: Plan | None = None,
                        edits: dict | None = None) -> None:
        if status not in PLAN_STATUSES:
            raise ValueError(f"unknown plan status {status!r}")
        with self._tx() as db:
            db.execute("UPDATE plans SET status = ?, decided_at = ? WHERE id = ?", (status, at, plan_id))
            if plan is not None:
                db.execute("UPDATE plans SET plan = ? WHERE id = ?", (plan_to_json(plan), plan_id))
            if edits is not None:
                db.execute("UPDATE plans SET edits = ? WHERE id = ?", (json.dumps(edits), plan_id))

    def start_applying(self, plan_id: int, changes: tuple[Change, ...], at: float) -> None:
        """Record every step before any runs, in one transaction: a crash leaves all or none."""
        with self._tx() as db:
            db.execute("UPDATE plans SET status = 'applying', decided_at = ? WHERE id = ?", (at, plan_id))
            for i, c in enumerate(changes):
                db.execute("INSERT OR IGNORE INTO plan_steps (plan_id, idx, job_id, change) VALUES (?, ?, ?, ?)",
                           (plan_id, i, c.job_id, change_to_json(c)))

    def steps(self, plan_id: int) -> list[StepRecord]:
        rows = self._db.execute("SELECT plan_id, idx, change, status, message FROM plan_steps WHERE plan_id = ? "
                                "ORDER BY idx", (plan_id,))
        return [StepRecord(p, i, change_from_json(c), s, m) for p, i, c, s, m in rows]

    def mark_step(self, plan_id: int, idx: int, status: str, at: float, message: str = "") -> None:
        column = "started_at" if status == "running" else "finished_at"
        with self._tx() as db:
            db.execute(f"UPDATE plan_steps SET status = ?, {column} = ?, message = ? WHERE plan_id = ? AND idx = ?",
                       (status, at, message, plan_id, idx))

