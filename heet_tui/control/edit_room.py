"""Whether a Plan-screen edit leaves its job room to run at all.

Two GPUs pinned to a host with one were taken: the plan then gave the job nothing, the screen
said "No plan pending", and the job's message said the free GPUs went to no job, for as long as
the edit stood. An edit that no ready host can hold is refused where it is made, saying why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from heet_tui.core.gpu import type_allowed
from heet_tui.core.sched_input import Constraints

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller


def refuse_too_big(ctl: Controller, job_id: str, c: Constraints) -> None:
    """Raises ``ValueError`` (shown in the tweak dialog) for an edit no ready host can hold."""
    rec = ctl.store.job(job_id)
    if rec is None:
        return
    if c.pinned_hosts and not c.held and set(c.pinned_hosts) <= (drained := ctl.drained()):
        # pinned to a drained host, the job waited with no word of the drain: "the heet plan gives the
        # free GPUs to no job", or "left out by the policy, or in a plan you rejected"
        one = len(c.pinned_hosts) == 1
        raise ValueError(f"{', '.join(sorted(set(c.pinned_hosts) & drained))} {'is' if one else 'are'} drained: no plan "
                         f"places a job there (undrain {'it' if one else 'them'} on the Cluster screen, or pin "
                         "another host)")
    spec, usable = rec.job.spec, {h.name: h.gpus for h in ctl.hosts.hosts}
    # every GPU heet may use on each ready host, busy or not (the plan view leaves out full hosts)
    ready = [(s.name, s.gpu_type, sum(1 for g in s.gpus if usable.get(s.name) is None or g.index in usable[s.name]))
             for s in ctl.cluster.status() if s.state.value == "ready" and s.gpus]
    if (why := too_big_for_the_cluster(c, spec.min_gpus, spec.gpu_types, ready)):
        raise ValueError(why)  # said of the job in the dialog; "tweak b: b: ..." in the toast


def too_big_for_the_cluster(c: Constraints, min_gpus: int, gpu_types: tuple[str, ...],
                            ready: Sequence[tuple[str, str, int]]) -> str | None:
    """Why the edit cannot be met by the ready hosts' GPUs (``ready``: name, GPU type, GPUs heet
    may use), of one type as a job runs on one; else None. A pinned host that is not ready now is
    not judged here: it may come back."""
    if c.held:
        return None
    if c.pinned_hosts and not set(c.pinned_hosts) <= {name for name, _, _ in ready}:
        return None
    need = c.fixed_count or min_gpus
    per_type: dict[str, int] = defaultdict(int)
    for name, gpu_type, count in ready:
        if (not c.pinned_hosts or name in c.pinned_hosts) and type_allowed(gpu_type, gpu_types) and (
                c.pinned_type is None or gpu_type == c.pinned_type):
            per_type[gpu_type] += count
    most = max(per_type.values(), default=0)
    if most >= need or not per_type:  # none at all: a type or host it may not use, said by the plan's own check
        return None
    where = f"{', '.join(c.pinned_hosts)} {'has' if len(c.pinned_hosts) == 1 else 'have'}" if c.pinned_hosts \
        else "the ready hosts have"
    kind = f" {c.pinned_type}" if c.pinned_type else ""
    held = ", ".join(f"{n}x{t}" for t, n in sorted(per_type.items()))
    return f"{need} GPU(s) cannot be given: {where} at most {most}{kind} GPU(s) of one type ({held})"
