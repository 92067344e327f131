"""What profiling cost, per job: how many profiling runs and the GPU-seconds they held.

Profiling is only cheap if someone can see what it spent: the runs went by as state changes in a
job's history, and the GPU-seconds were nowhere (a user counted observations in the SQLite file).
Kept in the store, so the figure outlives the controller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from heet_tui.control.runtime import Run
from heet_tui.control.store import Store

SETTING = "profiling_cost"  # store setting: job -> [runs, GPU-seconds]


@dataclass(frozen=True, slots=True)
class ProfilingCost:
    runs: int = 0
    gpu_s: float = 0.0

    def describe(self) -> str:
        return f"{self.runs} run(s), {self.gpu_s:,.0f} GPU-seconds" if self.runs else "-"


def profiling_costs(store: Store) -> dict[str, ProfilingCost]:
    try:
        raw = json.loads(store.setting(SETTING) or "{}")
        return {str(job): ProfilingCost(int(runs), float(gpu_s)) for job, (runs, gpu_s) in raw.items()}
    except (ValueError, TypeError):
        return {}  # unreadable: counted afresh from here


def record_profiling_run(store: Store, run: Run, now: float) -> None:
    """Adds an ended profiling run's GPUs x seconds it held them to its job's cost."""
    held_s = max(0.0, run.ended_at(run.started_at, now) - run.started_at)
    costs = profiling_costs(store)
    had = costs.get(run.job_id, ProfilingCost())
    costs[run.job_id] = ProfilingCost(had.runs + 1, had.gpu_s + held_s * run.alloc.num_gpus)
    store.set_setting(SETTING, json.dumps({j: [c.runs, round(c.gpu_s, 3)] for j, c in sorted(costs.items())}))
