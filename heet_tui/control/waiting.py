"""Why a queued job has no GPUs: it cannot fit on the cluster as it is, or the latest plan
leaves it waiting (and for what), or a plan that starts it waits for approval.

A job that asks for a GPU type no ready host has, or for more GPUs of one type than the
cluster holds, gets no plan and, without a word, looks like it is waiting for its turn. The
controller puts the reason in the job's message, and takes it back once a host that can hold
the job is ready.

A job that fits but that the plan leaves queued said "profiled; waiting for a plan" while a
plan stood. Seen in a lab of two A100 and two T4 hosts: a job held for the A100s sat beside
eight idle T4s for a minute and a half with that message, which read like a hang. It now says
which of three it is: every GPU it may use is taken, the policy holds it for a faster type
that frees soon, or the policy leaves it out though GPUs are free. The message names no
countdown (it would rewrite the store every round); the TUI adds the plan's predicted start.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from heet_tui.control.runtime import gpus_held, union_gpus
from heet_tui.control.user_constraints import user_constraints
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import (
    CANNOT_START,
    HELD_FOR_FASTER,
    LEFT_QUEUED,
    PLAN_WAITING,
    WAITING_FOR_GPUS,
    JobSpec,
    JobState,
)
from heet_tui.core.plan import ChangeKind, JobPrediction, Plan
from heet_tui.core.sched_input import ClusterView

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller

PREFIX = CANNOT_START
NO_PLAN_YET = PLAN_WAITING
REPLAN = "nothing is proposed until something changes (p on the Plan screen, or heet-tui plan again, plans now)"


@dataclass(frozen=True, slots=True)
class PlanMade:
    """The latest plan the controller made, whether proposed or not, and the jobs it weighed
    (a job the plan did not weigh, such as one backing off after a crash, keeps its message).
    Predictions and starts by job: looked up for every queued job every round. ``plan_id``:
    the id it was proposed under; ``rejected``: the user rejected this plan before."""

    plan: Plan
    weighed: frozenset[str]
    predictions: dict[str, JobPrediction] = field(default_factory=dict)
    starts: dict[str, Allocation] = field(default_factory=dict)
    plan_id: int | None = None
    rejected: bool = False

    @staticmethod
    def of(plan: Plan, weighed: frozenset[str]) -> PlanMade:
        return PlanMade(plan, weighed, {p.job_id: p for p in plan.effect.jobs},
                        {c.job_id: c.after for c in plan.changes if c.kind is ChangeKind.START and c.after})


def why_waiting(spec: JobSpec, cluster: ClusterView) -> str | None:
    capacity: dict[str, int] = {}
    for h in cluster.hosts:
        if not h.drained:
            capacity[h.gpu_type] = capacity.get(h.gpu_type, 0) + len(h.free)
    if not capacity:
        # "no host is ready" beside 3 of 3 ready hosts whose GPUs could not be read (no NVML there)
        return f"{PREFIX}no ready host has a usable GPU (see the Cluster screen, or heet-tui hosts check)"
    allowed = {t: n for t, n in capacity.items() if spec.allows(t)}
    if not allowed:
        ready = ", ".join(f"{n}x{t}" for t, n in sorted(capacity.items()))
        return f"{PREFIX}no ready host has {' or '.join(spec.gpu_types)} GPUs (ready and not drained: {ready})"
    most = max(sorted(allowed), key=lambda t: allowed[t])
    if allowed[most] < spec.min_gpus:
        return (f"{PREFIX}it needs at least {spec.min_gpus} GPUs of one type; the most the ready hosts have is "
                f"{allowed[most]}x{most}")
    return None


def free_after(plan: Plan, cluster: ClusterView, kept: dict[str, set[int]]) -> Counter[str]:
    """GPUs per type that nothing holds once ``plan`` is applied; ``kept``: GPUs of runs the
    plan did not weigh (they keep them)."""
    taken: dict[str, set[int]] = {h: set(ix) for h, ix in kept.items()}
    for alloc in plan.allocations.values():
        for host, ix in alloc.hosts:
            taken.setdefault(host, set()).update(ix)
    out: Counter[str] = Counter()
    for h in cluster.hosts:
        if not h.drained:
            out[h.gpu_type] += len(set(h.free) - taken.get(h.name, set()))
    return out


def plan_reason(job_id: str, spec: JobSpec, made: PlanMade, pending_id: int | None, rejected: bool,
                free: Counter[str], held: bool, not_auto: str = "", read_only: bool = False) -> str | None:
    """The message for a queued job the latest plan weighed (module docstring); None: leave it.
    ``pending_id``: the plan waits for approval under that id; ``rejected``: the user rejected it;
    ``not_auto``: why auto-approve, on, leaves that plan to the user."""
    plan = made.plan
    if rejected and (job_id not in plan.allocations or made.starts.get(job_id) is not None):
        # what a rejected plan would have left free is not what is free: it said "every GPU it may
        # use is taken" on an idle cluster, the GPUs the rejected plan gave others counted as taken
        started = "a plan that starts it" if job_id in plan.allocations else "the latest plan"
        return f"{LEFT_QUEUED}{started} was rejected; {REPLAN}"
    if job_id in plan.allocations:
        start = made.starts.get(job_id)
        if start is None:
            return None
        if pending_id is None:
            return None  # being started now
        planned = f"in plan #{pending_id} (start on {start.num_gpus}x{start.gpu_type})"
        if read_only:  # "heet-tui plan approve" is refused by such a controller
            return f"{planned}; this controller only watches (--read-only): one started without it applies plans"
        if not_auto:
            return f"{planned}, not auto-approved: {not_auto}; a on the Plan screen, or heet-tui plan approve, applies it"
        return f"{planned}, waiting for approval: a on the Plan screen, or heet-tui plan approve"
    if held:
        return f"{LEFT_QUEUED}held by hand (e on the Plan screen changes it)"
    usable = sorted(t for t, n in free.items() if n >= spec.min_gpus and spec.allows(t))
    pred = made.predictions.get(job_id)
    target = pred.starts_on if pred else None
    if usable and target and target not in usable:
        return (f"{HELD_FOR_FASTER}the plan waits for {target} GPUs, predicted to free soon enough to finish it "
                f"sooner than a start now on the free {' or '.join(usable)} GPUs")
    if usable:
        return (f"{LEFT_QUEUED}the {plan.policy or 'policy'} plan gives the free "
                f"{', '.join(f'{free[t]}x{t}' for t in usable)} GPUs to no job; it is planned again as jobs come and go")
    types = " or ".join(spec.gpu_types) + " " if spec.gpu_types else ""
    then = f"; it should start on {target} as running jobs end" if target else ""
    # GPUs idle now that the plan awaiting approval gives others read as taken by running jobs
    given = sorted(j for j, a in made.starts.items() if a is not None and spec.allows(a.gpu_type) and j != job_id)
    if pending_id is not None and given:
        then = f" (plan #{pending_id}, awaiting approval, starts {', '.join(given)} on them){then}"
    some = sorted(t for t, n in free.items() if n > 0 and spec.allows(t))
    if some:  # "every GPU ... is taken" beside free GPUs, too few of one type for it
        left = ", ".join(f"{free[t]}x{t}" for t in some)
        return (f"{WAITING_FOR_GPUS}it needs {spec.min_gpus} GPUs of one type, and only {left} "
                f"{'is' if sum(free[t] for t in some) == 1 else 'are'} free{then}")
    return f"{WAITING_FOR_GPUS}every {types}GPU it may use is taken{then}"


def explain_waiting(ctl: Controller, now: float) -> None:
    """Put each queued job's reason in its message, and take it back once it could run."""
    queued = [rec.job for rec in ctl.store.jobs(include_terminal=False)
              if rec.job.state is JobState.QUEUED and rec.job.id not in ctl.executor.runs]
    if not queued:
        return
    cluster = ctl.cluster_view(for_plans=False)  # whether it could ever fit, not whether it fits now
    made: PlanMade | None = ctl.plan_made
    free: Counter[str] = Counter()
    held: set[str] = set()
    pending_id = None
    if made is not None:
        # GPUs the plan does not hand out stay where they are: runs it did not weigh (profiling
        # runs among them) and other state stores' processes
        kept = union_gpus(gpus_held(r for r in ctl.executor.all_runs() if r.job_id not in made.weighed),
                          ctl.executor.reserved_gpus())
        free = free_after(made.plan, cluster, kept)
        held = {j for j, c in user_constraints(ctl.store).items() if c.held}
        applying = ctl.applying is not None and not ctl.applying.done()
        if made.plan_id is not None and made.plan_id == ctl.pending_plan_id and not applying:
            pending_id = made.plan_id  # approved, it is being applied: its starts are under way
    for job in queued:
        why = why_waiting(job.spec, cluster)
        avoided = ctl.executor.health.avoided.get(ctl.book.classes.get(job.id), set())
        if why is None and made is not None and job.id in made.weighed:
            # GPUs on hosts its class keeps off are not free to it: "held for faster GPUs ... than a
            # start now on the free T4 GPUs" was said of a sweep kept off the only T4 host
            own = free if not avoided else free_after(
                made.plan, replace(cluster, hosts=tuple(h for h in cluster.hosts if h.name not in avoided)), kept)
            why = plan_reason(job.id, job.spec, made, pending_id, made.rejected, own, job.id in held,
                              ctl.not_auto_approved, ctl.opt.read_only)
        elif why is None and job.message.startswith(PREFIX):
            why = NO_PLAN_YET
        if why is not None and why.startswith(WAITING_FOR_GPUS) and \
                (blocked := blocked_hosts(job.spec, ctl.cluster.status())):
            # first: "every T4 GPU it may use is taken" led, beside two idle T4s on a host whose disk was full
            why = f"{WAITING_FOR_GPUS}{blocked}; elsewhere {why.removeprefix(WAITING_FOR_GPUS)}"
        if why is not None and why.startswith(WAITING_FOR_GPUS) and "is taken" in why and \
                (drained := sorted(h.name for h in cluster.hosts if h.drained and job.spec.allows(h.gpu_type))):
            # "every GPU it may use is taken" beside idle GPUs on a drained host
            why += f"; drained, so not used: {', '.join(drained[:3])}{' …' if len(drained) > 3 else ''}"
        if why is not None and why.startswith((WAITING_FOR_GPUS, LEFT_QUEUED, HELD_FOR_FASTER)):
            why += kept_off(avoided)
        if why is not None and job.message != why:
            ctl.store.try_set_state(job.id, JobState.QUEUED, now, why)


def kept_off(hosts: set[str]) -> str:
    """What a waiting job adds for the hosts its class keeps off (host_health.py): beside free GPUs
    there, "the plan gives the free 2xA100 GPUs to no job" read as the policy's whim."""
    if not hosts:
        return ""
    return (f"; it keeps off {', '.join(sorted(hosts))}, where a run of its model and batch size died before "
            "its first progress report (it goes back there when no other host could hold it, or once it is "
            "retried or updated)")


def blocked_hosts(spec: JobSpec, statuses) -> str:
    """What to add to "every GPU it may use is taken" for the ready hosts of the job's types that
    launch nothing now: with GPUs not read, the GPUs read idle and the header said 0/4 busy."""
    hosts = [s for s in statuses if s.launch_blocked and s.gpus and spec.allows(s.gpu_type)]
    return "; ".join(f"nothing is launched on {s.name} now: {s.launch_blocked.split('; ')[0]}" for s in hosts[:3])
