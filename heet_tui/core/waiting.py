"""Why jobs without GPUs wait while no plan is pending: said on the Plan screen and by ``heet-tui plan``."""

from __future__ import annotations

import re

from heet_tui.core.host import HostState
from heet_tui.core.job import (
    CANNOT_START,
    HELD_FOR_FASTER,
    PLAN_WAITING,
    PROFILE_WAITING,
    STARTING,
    TWIN_WAITING_END,
    WAITING_FOR_GPUS,
    JobState,
)
from heet_tui.core.snapshot import Snapshot

# a crashed job's message while its retry waits out a pause (control/crash_backoff.py)
RETRY_PAUSE = re.compile(r"; retry \d+/\d+( in a plan for you to approve)? in \d+ s$")


def some(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def why_waiting(snap: Snapshot, jobs_view: str = "the Jobs screen", replan: str = "p plans again",
                drop: str = "d there drops it") -> str:
    """Why jobs without GPUs have no plan: being profiled, unable to fit, or left out. (It said
    "a rejected plan is not proposed again" while the only waiting job was being profiled.)
    The other arguments name where to look and what to do, as the TUI or the command line has it."""
    waiting = [j for j in snap.jobs if not j.state.terminal and j.allocation is None]
    profiling = [j.id for j in waiting if j.state is JobState.PROFILING or j.message.endswith(TWIN_WAITING_END)]
    # "being profiled" was said of jobs nothing measured: no GPU of theirs was idle to do it on
    to_profile = [j.id for j in waiting if j.id not in profiling and j.message.startswith(PROFILE_WAITING)]
    blocked = [j.id for j in waiting if j.state is not JobState.PROFILING and j.message.startswith(CANNOT_START)]
    held = [j.id for j in waiting if j.message.startswith(HELD_FOR_FASTER)]
    # held on the Plan screen, or pinned where no ready host is: "p plans again" could not help
    by_hand = [j.id for j in waiting if j.edit.held or (j.edit.is_set and "your edit" in j.message)]
    # just measured, or told by the latest plan that they wait for GPUs: they read as "left out by
    # the policy, or in a plan you rejected" with auto-approve on and nothing rejected
    ready = [h for h in snap.hosts if h.state is HostState.READY]
    gpus = sum(len(h.gpus) for h in ready)
    full = gpus and sum(len(h.gpu_jobs) for h in ready) >= gpus
    next_plan = [] if full else [j.id for j in waiting if j.message.endswith(PLAN_WAITING)]
    for_gpus = [] if full else [j.id for j in waiting if j.message.startswith(WAITING_FOR_GPUS)]
    # an approved plan starting them, its checkpoint copy under way: "waiting with nothing proposed"
    starting = [j.id for j in waiting if STARTING in j.message]
    # crashed, retried after a pause: read as "left out by the policy, or in a plan you rejected"
    retrying = [j.id for j in waiting if RETRY_PAUSE.search(j.message)]
    rest = [j.id for j in waiting if j.id not in {*profiling, *to_profile, *blocked, *held, *by_hand, *next_plan,
                                                  *for_gpus, *starting, *retrying}]
    out = "".join(f" {some(ids)}: {said}" for ids, said in (
        (starting, "being started by the approved plan (a checkpoint that lies elsewhere is copied first)."),
        (retrying, f"crashed, and retried after a pause ({jobs_view} says why)."),
        (next_plan, "measured, planned in the next round."),
        (for_gpus, f"waiting for GPUs others hold ({jobs_view} says which, and when)."),
        (by_hand, f"kept out by your edit (see {jobs_view}; {drop})."),
        (profiling, "being profiled, planned once measured."),
        (to_profile, f"waiting to be profiled until a GPU it may use is idle ({jobs_view} says which), planned once "
                     "measured."),
        (blocked, f"cannot start on the hosts as they are (see {jobs_view})."),
        (held, f"held for faster GPUs that free soon (see {jobs_view})."),
    ) if ids)
    if rest and full:
        out += f" {some(rest)}: waiting for GPUs (all {gpus} are in use); planned as jobs end."
    elif rest:
        out += (f" {some(rest)}: waiting with nothing proposed (left out by the policy, or in a plan you "
                f"rejected, which is not proposed again until something changes); {replan}.")
    return out
