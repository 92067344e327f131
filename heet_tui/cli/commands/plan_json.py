"""``heet-tui plan show --json``: a plan as a script reads it.

A script that approves plans on a headless server had to parse the aligned table (job, change,
"2xA100 on a1", "1h02m ±12%") to decide, and the starts that lose their checkpoint were one
English sentence under it. The figures here are the same ones the table prints, as numbers.
"""

from __future__ import annotations

from typing import Any

from heet_tui.control.store_records import StepRecord
from heet_tui.core.allocation import Allocation
from heet_tui.core.plan import ChangeKind, JobPrediction, Plan, count_changes
from heet_tui.core.snapshot import Snapshot


def _alloc(a: Allocation | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {"gpu_type": a.gpu_type, "gpus": a.num_gpus, "hosts": {h: list(ix) for h, ix in a.hosts},
            "text": a.describe()}


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _prediction(pred: JobPrediction | None, holds_before: bool = True, holds_after: bool = True) -> dict[str, Any]:
    """The predicted figures of one job; ``spread`` is relative (0.12 = ±12%), null for a rough guess.
    A speed of exactly 0 on GPUs the job holds is one nobody measured (the controller hides the
    nominal figures of an unmeasured job): null, as its completion is, not 0 samples/s, which a
    script computing gains read as a job that would not train at all."""
    if pred is None:
        return {"throughput_before": None, "throughput_after": None, "completes_in_s": None,
                "restart_pause_s": None, "spread": None}
    before = None if holds_before and pred.throughput_before == 0 else _rounded(pred.throughput_before)
    after = None if holds_after and pred.throughput_after == 0 else _rounded(pred.throughput_after)
    return {"throughput_before": before, "throughput_after": after,
            "completes_in_s": _rounded(pred.completion_s, 1), "restart_pause_s": _rounded(pred.restart_pause_s, 1),
            "spread": _rounded(pred.after_spread, 4)}


def plan_obj(plan: Plan, plan_id: int, policy: str, status: str, steps: list[StepRecord] | None = None, snap: Snapshot | None = None) -> dict[str, Any]:
    """One plan: its changes (with each one's outcome for a past plan), the jobs it leaves waiting,
    and, for the pending plan, the starts whose checkpoint is on a host out of reach."""
    effect = plan.effect
    done = {step.change.job_id: step for step in steps or ()}
    changes = []
    for change in plan.changes:
        step = done.get(change.job_id)
        changes.append({"job": change.job_id, "kind": change.kind.value, "before": _alloc(change.before),
                        "after": _alloc(change.after),
                        **_prediction(effect.for_job(change.job_id), change.before is not None, change.after is not None),
                        "step": {"status": step.status, "message": step.message} if step else None})
    changed = {c.job_id for c in plan.changes}
    waiting = [{"job": p.job_id, "starts_on": p.starts_on, "starts_in_s": _rounded(p.starts_in_s, 1),
                "completes_in_s": _rounded(p.completion_s, 1), "spread": _rounded(p.after_spread, 4)}
               for p in sorted(effect.jobs, key=lambda p: p.job_id)
               if p.job_id not in changed and p.job_id not in plan.allocations]
    starting = {c.job_id for c in plan.changes if c.kind is ChangeKind.START}
    away = [{"job": j.id, "checkpoint_on": j.checkpoint_away} for j in (snap.jobs if snap else ())
            if j.id in starting and j.checkpoint_away]
    return {"id": plan_id, "policy": policy, "status": status, "created_at": round(plan.created_at, 3),
            "summary": count_changes(plan.changes), "avg_jct_s": _rounded(effect.avg_jct_s, 1),
            "avg_jct_without_s": _rounded(effect.avg_jct_before_s, 1), "changes": changes, "waiting": waiting,
            "starts_without_checkpoint": away, "most_delayed": _delayed(effect)}


def _delayed(effect) -> dict | None:
    """The running job the plan delays most, where worth saying (as ``plan show`` says it)."""
    if (worst := effect.most_delayed()) is None:
        return None
    job_id, late, before, after = worst
    return {"job": job_id, "delay_s": _rounded(late, 1), "done_in_without_s": _rounded(before, 1),
            "done_in_s": _rounded(after, 1)}
