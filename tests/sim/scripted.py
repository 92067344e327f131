"""A policy that plays back allocations from a script, so tests control every round exactly."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView

Script = Callable[[float, Sequence[JobView]], dict[str, Allocation]]


class ScriptedPolicy:
    name = "scripted"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[float] = []

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        self.calls.append(now)
        current = {j.id: j.current for j in jobs if j.current is not None}
        return Plan.build(current, self.script(now, jobs), policy=self.name, now=now)
