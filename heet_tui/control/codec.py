"""JSON forms of the core dataclasses the store keeps (specs, allocations, plans, constraints).

The store holds plain JSON text rather than pickles so a user can inspect it with ``sqlite3``
and so a newer heet-tui can read what an older one wrote.
"""

from __future__ import annotations

import json
from typing import Any

from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, Target, TargetKind
from heet_tui.core.metrics import Metrics
from heet_tui.core.plan import Change, ChangeKind, JobPrediction, Plan, PredictedEffect
from heet_tui.core.sched_input import Constraints


def spec_to_json(spec: JobSpec) -> str:
    return json.dumps(spec_to_obj(spec))


def spec_to_obj(spec: JobSpec) -> dict[str, Any]:
    return {
        "name": spec.name, "command": list(spec.command), "model": spec.model, "batch_size": spec.batch_size,
        "target": {"kind": spec.target.kind.value, "value": spec.target.value}, "workdir": spec.workdir,
        "env": [list(p) for p in spec.env], "min_gpus": spec.min_gpus, "max_gpus": spec.max_gpus,
        "gpu_types": list(spec.gpu_types), "priority": spec.priority, "checkpoint_dir": spec.checkpoint_dir,
        "dataset_samples": spec.dataset_samples, "stall_timeout_s": spec.stall_timeout_s,
        "stop_grace_s": spec.stop_grace_s,
    }


def spec_from_json(text: str) -> JobSpec:
    d = json.loads(text)
    return JobSpec(
        name=d["name"], command=tuple(d["command"]), model=d["model"], batch_size=int(d["batch_size"]),
        target=Target(TargetKind(d["target"]["kind"]), float(d["target"]["value"])), workdir=d["workdir"],
        env=tuple((k, v) for k, v in d["env"]), min_gpus=int(d["min_gpus"]), max_gpus=int(d["max_gpus"]),
        gpu_types=tuple(d["gpu_types"]), priority=int(d["priority"]), checkpoint_dir=d["checkpoint_dir"],
        dataset_samples=int(d["dataset_samples"]),
        stall_timeout_s=None if d.get("stall_timeout_s") is None else int(d["stall_timeout_s"]),  # older stores lack it
        stop_grace_s=None if d.get("stop_grace_s") is None else int(d["stop_grace_s"]),
    )


def alloc_to_obj(a: Allocation | None) -> Any:
    if a is None:
        return None
    return {"job_id": a.job_id, "gpu_type": a.gpu_type, "hosts": [[h, list(ix)] for h, ix in a.hosts]}


def alloc_from_obj(d: Any) -> Allocation | None:
    if d is None:
        return None
    return Allocation.of(d["job_id"], d["gpu_type"], {h: list(ix) for h, ix in d["hosts"]})


def constraints_to_obj(c: Constraints) -> dict[str, Any]:
    return {"pinned_type": c.pinned_type, "fixed_count": c.fixed_count, "pinned_hosts": list(c.pinned_hosts),
            "held": c.held}


def constraints_from_obj(d: dict[str, Any]) -> Constraints:
    return Constraints(d.get("pinned_type"), d.get("fixed_count"), tuple(d.get("pinned_hosts", ())),
                       bool(d.get("held", False)))


def plan_to_json(plan: Plan) -> str:
    return json.dumps({
        "allocations": {j: alloc_to_obj(a) for j, a in plan.allocations.items()},
        "changes": [{"job_id": c.job_id, "kind": c.kind.value, "before": alloc_to_obj(c.before),
                     "after": alloc_to_obj(c.after)} for c in plan.changes],
        "effect": {
            "jobs": [[p.job_id, p.throughput_before, p.throughput_after, p.completion_s, p.restart_pause_s,
                      p.starts_in_s, p.starts_on, p.after_spread, p.placed_on]
                     for p in plan.effect.jobs],
            "avg_jct_s": plan.effect.avg_jct_s, "avg_jct_before_s": plan.effect.avg_jct_before_s,
            "at": plan.effect.at,
        },
        "policy": plan.policy, "created_at": plan.created_at,
    })


def plan_from_json(text: str) -> Plan:
    d = json.loads(text)
    allocations = {j: alloc_from_obj(a) for j, a in d["allocations"].items()}
    changes = tuple(Change(c["job_id"], ChangeKind(c["kind"]), alloc_from_obj(c["before"]),
                           alloc_from_obj(c["after"])) for c in d["changes"])
    e = d["effect"]
    effect = PredictedEffect(tuple(JobPrediction(*row) for row in e["jobs"]), e["avg_jct_s"], e["avg_jct_before_s"],
                             e.get("at"))  # plans stored before predictions were dated have none
    return Plan(allocations, changes, effect, d["policy"], d["created_at"])


def change_to_json(c: Change) -> str:
    return json.dumps({"job_id": c.job_id, "kind": c.kind.value, "before": alloc_to_obj(c.before),
                       "after": alloc_to_obj(c.after)})


def change_from_json(text: str) -> Change:
    c = json.loads(text)
    return Change(c["job_id"], ChangeKind(c["kind"]), alloc_from_obj(c["before"]), alloc_from_obj(c["after"]))


def metrics_from_json(text: str | None) -> Metrics:
    """Tolerant: metrics are shown, never acted on, so an unreadable value shows as none rather
    than making the job's row unreadable."""
    try:
        pairs = json.loads(text or "[]")
        return tuple((str(k), float(v)) for k, v in pairs)
    except (TypeError, ValueError):
        return ()
