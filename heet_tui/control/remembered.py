"""How a state store's controller runs, as the store remembers it between controllers: the
policy and auto-approve that ``run --policy``/``--auto-approve`` and the TUI's ``t`` set.

Read by the controller at start, by the crash back-off (manual mode restarts nothing by itself),
and by ``status`` and ``plan show`` when no controller runs (they said null, as if unknown).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heet_tui.control.store import Store

DEFAULT_POLICY = "heet"


def remembered_auto_approve(store: Store) -> bool:
    return bool(json.loads(store.setting("auto_approve") or "false"))


def remembered_policy(store: Store, default: str = DEFAULT_POLICY) -> str:
    return store.setting("policy") or default
