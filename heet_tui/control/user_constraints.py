"""The constraints the user fixed by hand on the Plan screen (pinned type or hosts, a fixed
count, held), kept in the store's settings so that they outlive a controller restart and every
plan made after the edit respects them.

An edit lasts until the user drops it (``DropEdit``), and rejecting the plan it was made for
takes it back: before, an edit outlived that rejection, a retry and any number of plans, and
nothing showed it, so a job kept to the T4s it was once tweaked onto while the A100s sat idle.
"""

from __future__ import annotations

import json

from heet_tui.control.codec import constraints_from_obj, constraints_to_obj
from heet_tui.control.store import Store
from heet_tui.core.sched_input import Constraints

SETTING = "constraints"
DECIDED = ("approved", "applying", "applied", "failed")


def user_constraints(store: Store) -> dict[str, Constraints]:
    raw = json.loads(store.setting(SETTING) or "{}")
    return {job: constraints_from_obj(c) for job, c in raw.items()}


def set_user_constraints(store: Store, job_id: str, c: Constraints) -> None:
    """Fixing nothing removes the job's entry."""
    raw = json.loads(store.setting(SETTING) or "{}")
    if not c.is_set:
        raw.pop(job_id, None)
    else:
        raw[job_id] = constraints_to_obj(c)
    store.set_setting(SETTING, json.dumps(raw))


class PendingEdits:
    """The edits made since a plan was last approved, with what each job had before them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.before: dict[str, Constraints] = {}
        self.first_plan: int | None = None  # the plan the first of them was made for

    def edit(self, job_id: str, c: Constraints, plan_id: int) -> Constraints:
        """Keep ``c`` for the job; returns what it had."""
        had = user_constraints(self.store).get(job_id, Constraints())
        self.before.setdefault(job_id, had)
        self.first_plan = plan_id if self.first_plan is None else self.first_plan
        set_user_constraints(self.store, job_id, c)
        return had

    def drop(self, job_id: str) -> Constraints:
        """Forget the job's edit; returns it (nothing fixed: nothing to write)."""
        had = user_constraints(self.store).get(job_id, Constraints())
        self.before.pop(job_id, None)
        if had.is_set:
            set_user_constraints(self.store, job_id, Constraints())
        return had

    def commit(self) -> None:
        self.before, self.first_plan = {}, None

    def undo(self) -> dict[str, Constraints]:
        """Restore what the edited jobs had, unless a plan made since the first edit was approved
        (auto-approve takes an edited plan at the next round): those edits are in force. Returns
        the edits taken back, by job."""
        before, first = self.before, self.first_plan
        self.commit()
        if first is None or (self.store.latest_plan_id(*DECIDED) or 0) >= first:
            return {}
        now = user_constraints(self.store)
        for job_id, c in before.items():
            set_user_constraints(self.store, job_id, c)
        return {job_id: now.get(job_id, Constraints()) for job_id in before}
