"""How a state store's controller runs, as the store remembers it between controllers: the
policy, auto-approve, its gain threshold and host grace that ``run --policy``/``--auto-approve``/
``--gain-threshold``/``--host-grace`` and the TUI's ``t`` set, and the plans the user rejected.

Read by the controller at start, by the crash back-off (manual mode restarts nothing by itself),
and by ``status`` and ``plan show`` when no controller runs (they said null, as if unknown).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heet_tui.control.controller import ControllerOptions
    from heet_tui.control.store import Store

DEFAULT_POLICY = "heet"


def remembered_auto_approve(store: Store) -> bool:
    return bool(json.loads(store.setting("auto_approve") or "false"))


def remembered_policy(store: Store, default: str = DEFAULT_POLICY) -> str:
    return store.setting("policy") or default


def remembered_host_grace(store: Store, default: float) -> float:
    """``run --host-grace``'s seconds, for every controller of the store after it (the TUI's too:
    it ran with 60 s whatever the last ``run`` was given)."""
    try:
        value = float(store.setting("host_grace_s") or default)
    except ValueError:
        return default
    return value if value > 0 else default


REJECTED = "rejected_plans"
MOST_REJECTED = 50


def remembered_rejections(store: Store) -> set[str]:
    """The shapes (``planning.shape``) of the plans rejected and not yet asked for again: a plan
    "not proposed again unless something changes" came back as soon as the controller restarted."""
    try:
        return {str(shape) for shape in json.loads(store.setting(REJECTED) or "[]")}
    except (ValueError, TypeError):
        return set()


def remember_rejections(store: Store, shapes: set[str]) -> None:
    store.set_setting(REJECTED, json.dumps(sorted(shapes)[:MOST_REJECTED]))


def remembered_gain_threshold(store: Store, default: float) -> float:
    """``run --gain-threshold``'s fraction, for every controller of the store after it (the TUI's
    too: it auto-approved at 5% whatever the last ``run`` was given)."""
    try:
        value = float(store.setting("gain_threshold") or default)
    except ValueError:
        return default
    return value if math.isfinite(value) else default


def remembered_options(store: Store, options: ControllerOptions) -> ControllerOptions:
    """``options`` with the host grace and gain threshold the store remembers, where it does."""
    return replace(options, host_loss_grace_s=remembered_host_grace(store, options.host_loss_grace_s),
                   gain_threshold=remembered_gain_threshold(store, options.gain_threshold))
