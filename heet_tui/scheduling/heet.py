"""The Heet policy: price function, min-weight full bipartite matching, trading, placement.

One round:
1. ``Problem`` checks the input and works out what each job may use (constraints applied:
   held jobs get nothing, pinned type/hosts restrict, a fixed count sets min = max).
2. ``Valuation`` scores every (job, type, count) by value = weight x throughput (on the fastest
   of the packed and a few spread placements: ``Problem(shapes=True)``), weight =
   age/priority boost / remaining work, with the restart discount for changes.
3. ``match`` sizes slots from cluster pressure and solves a min-weight full bipartite
   matching of jobs to typed slots (value minus price), which fixes each admitted job's type.
4. ``trade`` moves single GPUs on each type from the lowest ask to the highest bid (free GPUs
   included) until the prices cross, which sizes each job.
   A grow that takes a GPU from a running job must also save more seconds than it costs
   (the JCT guard: completion-rate values make long jobs' pauses look free).
5. ``switch_types`` lets a job buy GPUs of another type from the holders that lose least
   (cross-type trading: the matching's type choice is not final), then trading runs again.
6. ``place`` maps type and count to hosts and GPU indices (stay put, the priced placement,
   one rack, best fit; a grow re-packs when that spans fewer hosts).
7. Starts on a slow type that waiting would beat are dropped (``deferral``), the jobs it starts
   exchange allocations where that finishes jobs sooner (``start_swaps``), and ``evaluate``
   predicts the effect.
"""

from __future__ import annotations

from collections.abc import Sequence

from heet_tui.core.plan import Plan
from heet_tui.core.sched_input import ClusterView, JobView
from heet_tui.scheduling.deferral import defer_slow_starts
from heet_tui.scheduling.evaluate import evaluate_problem
from heet_tui.scheduling.matching import match
from heet_tui.scheduling.placement import place
from heet_tui.scheduling.problem import Problem
from heet_tui.scheduling.start_swaps import swap_starts
from heet_tui.scheduling.switching import switch_types
from heet_tui.scheduling.trading import trade
from heet_tui.scheduling.valuation import HeetParams, Valuation


class HeetPolicy:
    """Elastic, heterogeneity-aware, SRPT-leaning scheduler (see module docstring)."""

    name = "heet"

    def __init__(self, predict: bool = True, shapes: bool = True, **params: float) -> None:
        """``shapes=False`` prices and places packed placements only (ablation)."""
        self.params = HeetParams(**params)
        self.predict = predict
        self.shapes = shapes

    def targets(self, problem: Problem) -> tuple[dict[str, tuple[str, int]], list[str]]:
        """(job id -> (type, count), job ids by decreasing weight) for one round."""
        valuation = Valuation(problem, self.params)
        active = [info for info in problem.infos if info.caps]
        final = trade(problem, valuation, active, match(problem, valuation, active, self.params.max_matching_columns))
        if self.params.switch_types and switch_types(problem, valuation, active, final):
            final = trade(problem, valuation, active, final)  # hand out the GPUs the switches freed
        order = sorted((info.id for info in active), key=lambda j: (-valuation.weight[j], j))
        return final, order

    def plan(self, cluster: ClusterView, jobs: Sequence[JobView], now: float) -> Plan:
        problem = Problem(cluster, jobs, shapes=self.shapes)
        targets, order = self.targets(problem)
        allocations = place(problem, targets, order)
        if self.params.defer_starts:
            kept = defer_slow_starts(problem, allocations)
            deferred = set(allocations) - set(kept)
            if deferred:  # plan the others without them: GPUs taken from others for their starts go back
                rest = Problem(cluster, [j for j in jobs if j.id not in deferred], shapes=self.shapes)
                targets, order = self.targets(rest)
                allocations = place(rest, targets, order)
        if self.params.swap_starts:
            allocations = swap_starts(problem, allocations)
        effect = evaluate_problem(problem, allocations) if self.predict else None
        return Plan.build(problem.current, allocations, self.name, now, effect)
