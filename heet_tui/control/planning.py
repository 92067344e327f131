"""One planning round: the policy's inputs from live state, the policy call, and the plan's gain.

Kept apart from the controller loop so preview (re-evaluate with one job tweaked) and the real
round build their inputs the same way. ``gain`` is what auto mode compares with its threshold:
the rise in the jobs' summed normalised throughput (each job's samples/s divided by its best
single-GPU rate, so a small model does not outweigh a big one), per job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from heet_tui.control.restart_costs import DEFAULT_RESTART_S
from heet_tui.control.throughput import ThroughputBook
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import JobSpec, JobState
from heet_tui.core.plan import ChangeKind, JobPrediction, Plan, PredictedEffect
from heet_tui.core.sched_input import ClusterView, Constraints, HostView, JobView, ThroughputFn
from heet_tui.core.snapshot import HostStatus
from heet_tui.core.waiting import some

SCHEDULABLE = (JobState.QUEUED, JobState.RUNNING, JobState.RESIZING)


@dataclass(frozen=True, slots=True)
class JobInput:
    """What planning needs about one job, gathered by the controller."""

    id: str
    state: JobState
    min_gpus: int
    max_gpus: int
    gpu_types: tuple[str, ...]
    priority: int
    submitted_at: float
    attained_gpu_s: float
    remaining_samples: float | None
    current: Allocation | None
    constraints: Constraints
    measured: bool = True  # False: planned on nominal throughput, remaining work unknown (control/unmeasured.py)
    restart_cost_s: float = DEFAULT_RESTART_S  # measured on the job when it can be (control/restart_costs.py)
    crashed_sizes: frozenset[tuple[str, int]] = frozenset()  # (type, GPUs) it died at on launch: left out


def cluster_view(statuses: tuple[HostStatus, ...], usable: Mapping[str, tuple[int, ...] | None],
                 drained: set[str], reserved: Mapping[str, set[int]] | None = None) -> ClusterView:
    """Ready hosts only: a host that is down or connecting has nothing to give this round.

    ``reserved`` GPUs (profiling runs) are in use but belong to no allocation, so no plan may
    give them out: it would fail when applied ("still in use"). They, and GPUs the hosts file
    does not let heet use, are left out of ``free``; the count stays the host's, because
    ``free`` holds the host's own GPU indices.
    """
    views = []
    reserved = reserved or {}
    for s in statuses:
        if s.state.value != "ready" or not s.gpus:
            continue
        allowed = usable.get(s.name)
        taken = reserved.get(s.name, set())
        free = tuple(g.index for g in s.gpus if (allowed is None or g.index in allowed) and g.index not in taken)
        if not free:
            continue
        count = max(g.index for g in s.gpus) + 1
        views.append(HostView(s.name, s.gpu_type, count, free, s.rack, s.name in drained))
    return ClusterView(tuple(views))


def job_views(jobs: list[JobInput], book: ThroughputBook, now: float,
              cluster: ClusterView | None = None) -> list[JobView]:
    """``cluster``: where the rigid policies' count (``requested_gpus``) comes from: a job's
    ``max_gpus`` where one GPU type holds that many, else the most one allowed type holds. Asked
    for its max_gpus of 8 on a cluster of 2 A100s and 4 T4s, fifo, srtf and gavel never started
    it, while the Jobs screen predicted its start "in ~0s"."""
    out = []
    nominal = book.nominal_function() if any(not j.measured for j in jobs) else None  # one per round
    held: dict[str, int] = {}
    for h in cluster.hosts if cluster is not None else ():
        if not h.drained:  # the GPUs heet may use there (a hosts file's gpus = [1, 2, 3] of 4), not the indices
            held[h.gpu_type] = held.get(h.gpu_type, 0) + len(h.free)
    for j in jobs:
        most = max((n for t, n in held.items() if not j.gpu_types or t in j.gpu_types), default=0)
        out.append(JobView(
            id=j.id, min_gpus=j.min_gpus, max_gpus=j.max_gpus,
            throughput=_without(book.function(j.id) if j.measured else nominal, j.crashed_sizes),
            gpu_types=j.gpu_types, current=j.current, remaining_samples=j.remaining_samples if j.measured else None,
            age_s=max(0.0, now - j.submitted_at), attained_gpu_s=j.attained_gpu_s, priority=j.priority,
            constraints=j.constraints, submitted_at=j.submitted_at,
            requested_gpus=max(j.min_gpus, min(j.max_gpus, most)) if most else j.max_gpus,
            restart_cost_s=j.restart_cost_s,
        ))
    return out


def _without(fn: ThroughputFn, sizes: frozenset[tuple[str, int]]) -> ThroughputFn:
    """Throughput 0 (not offered, as for a type the job cannot use) at the sizes it crashed at."""
    if not sizes:
        return fn
    return lambda gpu_type, placement: 0.0 if (gpu_type, sum(placement)) in sizes else fn(gpu_type, placement)


def make_named_policy(name: str):
    """The scheduling policy by name, with a message (not a traceback) when it does not exist."""
    try:
        from heet_tui.scheduling import make_policy
    except ImportError as exc:
        raise ValueError(f"the scheduling package offers no make_policy ({exc})") from None
    try:
        return make_policy(name)
    except (KeyError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def run_policy(policy, policy_name: str, cluster: ClusterView, views: list[JobView], book: ThroughputBook,
               now: float) -> Plan:
    plan = policy.plan(cluster, views, now)
    current = {v.id: v.current for v in views if v.current is not None}
    plan = Plan.build(current, dict(plan.allocations), policy_name or plan.policy, now,
                      plan.effect if plan.effect.jobs else None)
    if not plan.effect.jobs:
        plan = replace(plan, effect=predict(views, plan, book))
    return replace(plan, effect=with_spreads(plan, book))


def with_spreads(plan: Plan, book: ThroughputBook) -> PredictedEffect:
    """Each prediction marked with how sure its new speed is: a first plan rests on guesses,
    and its completion times read as facts without it."""
    preds = []
    for p in plan.effect.jobs:
        after = plan.allocations.get(p.job_id)
        spread = book.estimate_with_spread(p.job_id, after.gpu_type, after.placement)[1] if after else 0.0
        preds.append(replace(p, after_spread=spread))
    return replace(plan.effect, jobs=tuple(preds))


def check_constraints(plan: Plan, views: list[JobView]) -> list[str]:
    """Constraint violations in a plan (a policy must respect every edit; we verify, not trust)."""
    problems = []
    for v in views:
        a, c = plan.allocations.get(v.id), v.constraints
        if c.held and a is not None and a != v.current:
            problems.append(f"job {v.id} is held but the plan changes it")
        if a is None:
            continue
        if c.pinned_type and a.gpu_type != c.pinned_type:
            problems.append(f"job {v.id} is pinned to {c.pinned_type} but got {a.gpu_type}")
        if c.fixed_count is not None and a.num_gpus != c.fixed_count:
            problems.append(f"job {v.id} is fixed at {c.fixed_count} GPUs but got {a.num_gpus}")
        if c.pinned_hosts and not set(a.host_names) <= set(c.pinned_hosts):
            problems.append(f"job {v.id} is pinned to {', '.join(c.pinned_hosts)} but got {', '.join(a.host_names)}")
    return problems


def _rate(book: ThroughputBook, job_id: str, a: Allocation | None) -> float:
    return book.estimate(job_id, a.gpu_type, a.placement) if a is not None and a.num_gpus else 0.0


def predict(views: list[JobView], plan: Plan, book: ThroughputBook) -> PredictedEffect:
    preds = []
    for v in views:
        before, after = _rate(book, v.id, v.current), _rate(book, v.id, plan.allocations.get(v.id))
        eta = v.remaining_samples / after if after > 0 and v.remaining_samples is not None else None
        changed = any(c.job_id == v.id and c.needs_restart for c in plan.changes)
        a = plan.allocations.get(v.id)
        preds.append(JobPrediction(v.id, before, after, eta, v.restart_cost_s if changed else 0.0,
                                   placed_on=a.describe() if a is not None and a.num_gpus else None))
    etas = [p.completion_s for p in preds if p.completion_s is not None]
    before_etas = [v.remaining_samples / b for v in views
                   if v.remaining_samples is not None and (b := _rate(book, v.id, v.current)) > 0]
    return PredictedEffect(tuple(preds), sum(etas) / len(etas) if etas else None,
                           sum(before_etas) / len(before_etas) if before_etas else None)


def vacates(plan: Plan, drained: set[str]) -> bool:
    """Whether the plan moves a job off a drained host: what the user asked for, whatever it gains."""
    return any(c.before is not None and set(c.before.host_names) & drained
               and not (c.after is not None and set(c.after.host_names) & drained) for c in plan.changes)


def outside_spec(running: Iterable[tuple[str, JobSpec, Allocation]]) -> frozenset[str]:
    """Running jobs whose GPUs their spec no longer allows (``heet-tui update`` narrowed its types or
    count range): moving them is what the user asked for."""
    return frozenset(job_id for job_id, spec, alloc in running
                     if not spec.allows(alloc.gpu_type) or not spec.min_gpus <= alloc.num_gpus <= spec.max_gpus)


def held_back(plan: Plan, book: ThroughputBook, unmeasured: frozenset[str], drained: set[str],
              threshold: float, misplaced: frozenset[str] = frozenset(), recent: frozenset[str] = frozenset()
              ) -> str | None:
    """Why auto-approve leaves ``plan`` to the user; None when it applies it. The gain threshold
    keeps running jobs from being restarted for a little; a plan that only starts queued jobs
    restarts nothing, and goes ahead whatever it is predicted to gain: a start predicted poorly
    (at a size that had crashed) sat "waiting for approval" under auto-approve, unannounced.
    Nor is a plan held that moves a job off a drained host or off GPUs its spec no longer allows
    (``misplaced``): a job updated to A100 only stayed on T4s, its move "gaining -100%". Nor
    is one applied that restarts a job started in the last ``SETTLE_S`` (``recent``)."""
    applied, why = auto_verdict(plan, book, unmeasured, drained, threshold, misplaced, recent)
    return None if applied else why


SETTLE_S = 120.0  # auto-approve restarts no job sooner than this after its last start


def for_priority(plan: Plan, priorities: Mapping[str, int]) -> str | None:
    """How ``plan`` serves a job of higher priority, when every job it restarts is of lower priority
    than one it starts or grows; else None. Such a plan changes no summed speed (a stop and a start
    of equally fast jobs "gain 0.0%"), so auto-approve held it: an urgent job waited for a
    low-priority one to end by itself."""
    served = [c.job_id for c in plan.changes if c.kind in (ChangeKind.START, ChangeKind.GROW)]
    if not served:
        return None
    top = max(served, key=lambda j: priorities.get(j, 0))
    rank = priorities.get(top, 0)
    paused = sorted(c.job_id for c in plan.changes if c.needs_restart and c.job_id != top)
    if not paused or any(priorities.get(j, 0) >= rank for j in paused):
        return None
    return f"it gives GPUs to {top} (priority {rank}) from {some(paused)}, of lower priority"


def breaks(c: Constraints, alloc: Allocation | None) -> bool:
    """Whether a job running on ``alloc`` is where what the user fixed for it (``c``) says it may
    not be: only a restart that ends that carries out the edit. (Any restart of a job with an edit
    of any age was taken for one: a pinned job's growth by the policy, 45 s after its start.)"""
    if alloc is None:
        return False
    return bool(c.held or (c.pinned_type and alloc.gpu_type != c.pinned_type)
                or (c.fixed_count and alloc.num_gpus != c.fixed_count)
                or (c.pinned_hosts and not set(alloc.host_names) <= set(c.pinned_hosts)))


def auto_verdict(plan: Plan, book: ThroughputBook, unmeasured: frozenset[str], drained: set[str],
                 threshold: float, misplaced: frozenset[str] = frozenset(),
                 recent: frozenset[str] = frozenset(), priorities: Mapping[str, int] | None = None,
                 edits: Mapping[str, Constraints] | None = None) -> tuple[bool, str]:
    """Whether auto-approve applies ``plan``, and why in words either way: an auto-approved plan
    that restarted jobs while reading "as without it" gave no figure for what it was applied on.
    A plan whose every restart brings a job where what the user fixed on the Plan screen
    (``edits``) says it must be, from where it may not be, carries out what they asked, as a
    drain's does."""
    if vacates(plan, drained):
        return True, "it moves jobs off drained hosts"
    restarts = [c for c in plan.changes if c.needs_restart]
    if restarts and edits and all(c.job_id in edits and breaks(edits[c.job_id], c.before) for c in restarts):
        return True, f"it carries out your edit to {', '.join(sorted(c.job_id for c in restarts))}"
    if any(c.job_id in misplaced for c in plan.changes):
        return True, "it moves jobs off GPUs their specs no longer allow"
    if all(c.kind is ChangeKind.START for c in plan.changes):
        return True, "it only starts queued jobs"
    if priorities and (served := for_priority(plan, priorities)):
        return True, served
    predicted = gain(plan, book, unmeasured)
    effect = plan.effect
    if predicted >= threshold:
        applied = (f"predicted gain {predicted:.1%} (the jobs' summed speed, each against its best measured "
                   f"one-GPU speed) is at least the threshold of {threshold:.0%}")
    elif effect.avg_jct_s is not None and effect.avg_jct_before_s and \
            effect.avg_jct_s <= effect.avg_jct_before_s * (1 - threshold):
        # "gain 0.0%, below the threshold" was said of a plan predicted to halve the average JCT
        applied = f"its predicted average JCT is {1 - effect.avg_jct_s / effect.avg_jct_before_s:.0%} shorter"
    else:  # said first: "started less than 120 s ago" read as if it would go ahead after
        return False, f"its predicted gain, {predicted:.1%}, is below the auto-approve threshold of {threshold:.0%}"
    # at 30 jobs on 25 hosts, jobs were grown and shrunk back within a minute, plan after plan: each
    # new size's first measurements moved the predictions the next plan was made from
    if again := sorted(c.job_id for c in plan.changes if c.needs_restart and c.job_id in recent):
        return False, (f"it restarts {some(again)}, started less than {SETTLE_S:.0f} s ago: auto-approve lets a job's "
                       "new size be measured before it restarts it again")
    return True, applied


def free_starts(plan: Plan) -> Plan | None:
    """The starts of ``plan`` onto GPUs no job holds now, as a plan of their own; None when there
    is none. Auto-approve applies them from a plan it holds for too small a gain: they restart
    nothing, and a job sat queued beside idle GPUs for minutes, its start held with the moves."""
    changed = {c.job_id for c in plan.changes}
    current = {j: a for j, a in plan.allocations.items() if j not in changed}
    current.update({c.job_id: c.before for c in plan.changes if c.before is not None})
    held = {(h, g) for a in current.values() for h, gpus in a.hosts for g in gpus}
    starts = {c.job_id: c.after for c in plan.changes if c.kind is ChangeKind.START and c.after is not None
              and not {(h, g) for h, gpus in c.after.hosts for g in gpus} & held}
    if not starts:
        return None
    effect = PredictedEffect(tuple(p for p in plan.effect.jobs if p.job_id in starts))
    return Plan.build(current, {**current, **starts}, plan.policy, plan.created_at, effect)


def gain(plan: Plan, book: ThroughputBook, unmeasured: frozenset[str] = frozenset()) -> float:
    """Summed normalised throughput after minus before, per job in the plan's effect.

    An ``unmeasured`` job has no throughput to compare: starting it counts as one job's worth.
    """
    if not plan.effect.jobs:
        return 0.0
    total = 0.0
    starts = {c.job_id for c in plan.changes if c.before is None and c.after is not None}
    for p in plan.effect.jobs:
        if p.job_id in unmeasured:
            total += 1.0 if p.job_id in starts else 0.0
            continue
        ref = max((v for (_t, k), v in book.measured(p.job_id).items() if k == "1"), default=0.0)
        ref = ref or max(p.throughput_before, p.throughput_after, 1e-9)
        total += (p.throughput_after - p.throughput_before) / ref
    return total / len(plan.effect.jobs)


def shape(plan: Plan) -> str:
    """What a person rejecting a plan rejected: each job's GPU type and count per host, not which
    GPUs (a rejected plan came back twice with the same moves on other GPU indices), and where each
    job it changes stood (a rejected shrink of a job to one A100 kept its start on that A100, once
    it was queued after its host was lost, from being proposed: it waited on an idle cluster)."""
    def counts(a: Allocation | None) -> list | None:
        return None if a is None else [a.gpu_type, [(h, len(g)) for h, g in a.hosts]]

    return json.dumps([sorted((j, *counts(a)) for j, a in plan.allocations.items()),
                       sorted((c.job_id, counts(c.before)) for c in plan.changes)])


def signature(plan: Plan) -> str:
    """What makes two plans the same plan: who goes where (a rejected or failed plan is known again)."""
    return json.dumps(sorted((j, a.gpu_type, a.hosts) for j, a in plan.allocations.items()))


DRIFT = 0.1  # how far a pending plan's figures may be from what it would say now before they are remade


def drifted(shown: PredictedEffect, now: PredictedEffect, tolerance: float = DRIFT) -> bool:
    """Whether a pending plan's predictions no longer say what planning says now: a job came or
    went, one's predicted start moved to another type, or a throughput, completion or start time
    it shows is off by more than ``tolerance`` (measured since, or the jobs ran on meanwhile: its
    times count from approval). Seen: "551/s -> 1233/s" on the Plan screen half a minute on,
    while the job ran at 772/s, because the same moves kept the plan and its figures."""
    old, new = {p.job_id: p for p in shown.jobs}, {p.job_id: p for p in now.jobs}
    if old.keys() != new.keys():
        return True

    def off(a: float | None, b: float | None) -> bool:
        if a is None or b is None:
            return (a is None) != (b is None)
        return abs(a - b) > tolerance * max(abs(a), abs(b), 1e-9)

    # the averages count from each job's submission: a plan read "average JCT 8s" after 28 s of waiting
    return off(shown.avg_jct_s, now.avg_jct_s) or off(shown.avg_jct_before_s, now.avg_jct_before_s) or any(
        p.starts_on != q.starts_on or any(off(getattr(p, f), getattr(q, f)) for f in _SHOWN)
        for p, q in ((old[j], new[j]) for j in old))


_SHOWN = ("throughput_before", "throughput_after", "completion_s", "starts_in_s")  # the Plan screen's figures
