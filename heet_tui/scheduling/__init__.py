"""Scheduling policies behind one interface: ``make_policy(name, **params).plan(cluster, jobs, now)``.

Every policy returns a ``heet_tui.core.plan.Plan``; ``evaluate`` predicts the effect of any
plan (including a hand-edited one) and ``replan_with_edit`` re-plans after a user edit. See
docs/SCHEDULING.md for the mathematics.
"""

from heet_tui.scheduling.edits import apply_constraints, replan_with_edit
from heet_tui.scheduling.evaluate import evaluate
from heet_tui.scheduling.registry import POLICY_NAMES, Policy, make_policy

__all__ = ["POLICY_NAMES", "Policy", "apply_constraints", "evaluate", "make_policy", "replan_with_edit"]
