"""Policy registry: names to classes, imported lazily.

Lazy imports keep ``make_policy("heet")`` from loading scipy's MILP solver, and let a policy
written elsewhere (``rigid-fifo``, by the simulator) be missing until someone asks for it,
with an error that says which module is missing instead of a failing package import.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView


class Policy(Protocol):
    name: str

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan: ...


_REGISTRY: dict[str, str] = {
    "heet": "heet_tui.scheduling.heet:HeetPolicy",
    "fifo": "heet_tui.scheduling.baselines:FifoPolicy",
    "gavel": "heet_tui.scheduling.baselines:GavelPolicy",
    "srtf": "heet_tui.scheduling.baselines:SrtfPolicy",
    "goodput-mip": "heet_tui.scheduling.goodput_mip:GoodputMipPolicy",
    "heet-lookahead": "heet_tui.scheduling.lookahead_policy:LookaheadPolicy",
    "rigid-fifo": "heet_tui.scheduling.rigid_fifo:RigidFifoPolicy",
}

POLICY_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def make_policy(name: str, **params: object) -> Policy:
    """A fresh policy object; ``params`` go to its constructor (unknown ones raise ValueError)."""
    target = _REGISTRY.get(name)
    if target is None:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"policy {name!r} is not available: module {module_name} is missing ({exc})") from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ValueError(f"policy {name!r} is not available: {module_name} has no {class_name}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"policy {name!r}: bad parameters {sorted(params)}: {exc}") from exc
