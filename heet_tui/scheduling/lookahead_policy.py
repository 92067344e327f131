"""heet-lookahead: the Heet policy's look-ahead variant, acting on the LP's first slot.

The LP (``lookahead``) says what share of the next minute each job should spend in each
configuration. A cluster needs one configuration per job, so the first slot is rounded:

1. A job the LP runs for less than ``min_share`` of the slot waits (or keeps its GPUs, step 3).
2. A running job whose current configuration has at least ``keep`` of its share stays put, and
   such jobs are served first: a restart costs real time, a fractional difference does not.
   A job that can finish within the slot ranks its configurations by when they finish it
   (restart counted) instead: the LP's split of its last seconds is arbitrary.
3. The others, by decreasing share, take their largest-share configuration that still fits,
   else their next; GPUs left idle then go to unassigned jobs (running ones keep theirs if they
   fit, then the rest by submission, each on its fastest fitting configuration).

Rounds with more than ``max_jobs_per_lp`` active jobs are split POP-style (Narayanan et al.,
SOSP 2021): jobs dealt round-robin by age into groups, each with its share of every type, so
the cost stays near linear in cluster size. If the solver fails, the round falls back to the
plain Heet policy rather than leaving the cluster idle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView
from heet_tui.scheduling.baselines import _finish
from heet_tui.scheduling.lookahead import FIRST_SLOTS_S, FirstSlot, LookaheadParams, solve_first_slot
from heet_tui.scheduling.problem import JobInfo, Problem


def round_first_slot(problem: Problem, first: FirstSlot, left: dict[str, int], params: LookaheadParams
                     ) -> dict[str, tuple[str, int]]:
    """One (type, count) per job from the LP's fractional first slot, within ``left`` (mutated)."""
    choices: list[tuple[int, float, str, list[tuple[str, int]]]] = []
    for job_id, shares in first.items():
        total = sum(shares.values())
        if total < params.min_share:
            continue
        info = problem.by_id[job_id]
        cur = info.current_config
        options = sorted(shares, key=lambda c: (-shares[c], c))
        finish = {c: _finish_s(problem, info, c) for c in [*options, *([cur] if cur else [])]}
        if min(finish.values()) <= FIRST_SLOTS_S[0]:
            # The LP is indifferent to which configuration does a job's last work inside one
            # slot (every share there costs the slot's midpoint), so its split says nothing:
            # the configuration that finishes first, restart counted, does.
            options = sorted(finish, key=lambda c: (finish[c], c))
            stays = options[0] == cur
        else:
            stays = cur is not None and shares.get(cur, 0.0) >= params.keep * total
        if stays:
            options.remove(cur)  # type: ignore[arg-type]
            options.insert(0, cur)  # type: ignore[arg-type]
        choices.append((0 if stays else 1, -total, job_id, options))
    targets: dict[str, tuple[str, int]] = {}
    for _, _, job_id, options in sorted(choices):
        for t, k in options:
            if left.get(t, 0) >= k:
                targets[job_id] = (t, k)
                left[t] -= k
                break
    return targets


def _finish_s(problem: Problem, info: JobInfo, config: tuple[str, int]) -> float:
    """Seconds until the job would finish on ``config`` from now, its restart included."""
    thr = problem.throughput(info, *config)
    if thr <= 0:
        return math.inf
    pause = 0.0 if config == info.current_config else info.view.restart_cost_s
    return pause + problem.remaining_samples(info) / thr


def fill_leftovers(problem: Problem, infos: Sequence[JobInfo], targets: dict[str, tuple[str, int]],
                   left: dict[str, int]) -> None:
    """Idle GPUs go to unassigned jobs: running ones keep theirs if they fit, then the rest."""
    waiting = sorted((i for i in infos if i.id not in targets),
                     key=lambda i: (i.current_config is None, i.view.submitted_at, i.index))
    for info in waiting:
        cur = info.current_config
        if cur is not None and left.get(cur[0], 0) >= cur[1]:
            targets[info.id] = cur
            left[cur[0]] -= cur[1]
            continue
        best: tuple[float, str, int] | None = None
        for t, cap in info.caps.items():
            k = min(cap, left.get(t, 0))
            if k >= info.min_gpus:
                thr = problem.throughput(info, t, k)
                if thr > 0 and (best is None or thr > best[0]):
                    best = (thr, t, k)
        if best is not None:
            targets[info.id] = (best[1], best[2])
            left[best[1]] -= best[2]


def pop_groups(problem: Problem, infos: list[JobInfo], max_jobs: int) -> list[tuple[list[JobInfo], dict[str, int]]]:
    """Jobs dealt round-robin (oldest first) into groups, each with its share of every type."""
    n = max(1, math.ceil(len(infos) / max_jobs))
    if n == 1:
        return [(infos, dict(problem.capacity))]
    ranked = sorted(infos, key=lambda i: (-i.view.age_s, i.index))
    groups: list[tuple[list[JobInfo], dict[str, int]]] = [([], {}) for _ in range(n)]
    for pos, info in enumerate(ranked):
        groups[pos % n][0].append(info)
    for t, cap in problem.capacity.items():
        base, extra = divmod(cap, n)
        for g, (_, capacity) in enumerate(groups):
            capacity[t] = base + (1 if g < extra else 0)
    return groups


class LookaheadPolicy:
    """Heet with a time-indexed look-ahead LP in place of matching and trading (module doc)."""

    name = "heet-lookahead"

    def __init__(self, predict: bool = True, shapes: bool = True, **params: float) -> None:
        self.params = LookaheadParams(**params)  # type: ignore[arg-type]
        self.predict = predict
        self.shapes = shapes  # price and place spread placements too (see placement.py); False: packed only
        self.fallbacks = 0  # rounds the LP failed and plain Heet decided (for tests and benchmarks)

    def targets(self, problem: Problem) -> dict[str, tuple[str, int]] | None:
        active = [info for info in problem.infos if info.caps]
        left = dict(problem.capacity)
        targets: dict[str, tuple[str, int]] = {}
        for infos, capacity in pop_groups(problem, active, self.params.max_jobs_per_lp):
            first = solve_first_slot(problem, infos, capacity, self.params)
            if first is None:
                return None
            chosen = round_first_slot(problem, first, {t: min(capacity[t], left[t]) for t in capacity}, self.params)
            for t, k in chosen.values():
                left[t] -= k
            targets.update(chosen)
        fill_leftovers(problem, active, targets, left)
        return targets

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs, shapes=self.shapes)
        targets = self.targets(problem)
        if targets is None:
            self.fallbacks += 1
            from heet_tui.scheduling.heet import HeetPolicy

            return HeetPolicy(predict=self.predict, shapes=self.shapes).plan(cluster, jobs, now)
        order = sorted(targets, key=lambda j: (-targets[j][1], j))
        return _finish(self.name, problem, targets, order, cluster, jobs, now, self.predict)
