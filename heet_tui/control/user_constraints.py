"""The constraints the user fixed by hand on the Plan screen (pinned type or hosts, a fixed
count, held), kept in the store's settings so that they outlive a controller restart and every
plan made after the edit respects them."""

from __future__ import annotations

import json

from heet_tui.control.codec import constraints_from_obj, constraints_to_obj
from heet_tui.control.store import Store
from heet_tui.core.sched_input import Constraints

SETTING = "constraints"


def user_constraints(store: Store) -> dict[str, Constraints]:
    raw = json.loads(store.setting(SETTING) or "{}")
    return {job: constraints_from_obj(c) for job, c in raw.items()}


def set_user_constraints(store: Store, job_id: str, c: Constraints) -> None:
    raw = json.loads(store.setting(SETTING) or "{}")
    raw[job_id] = constraints_to_obj(c)
    store.set_setting(SETTING, json.dumps(raw))
