"""What the UI (or the CLI) asks the controller to do. Intents are data; the backend acts."""

from __future__ import annotations

from dataclasses import dataclass

from heet_tui.core.sched_input import Constraints

# Joins an intent's result to a warning the user should act on; the UI shows the warning apart.
WARNING_SEP = "; warning: "


@dataclass(frozen=True, slots=True)
class ApprovePlan:
    plan_id: int


@dataclass(frozen=True, slots=True)
class RejectPlan:
    plan_id: int


@dataclass(frozen=True, slots=True)
class EditJob:
    """A tweak to one job in the pending plan: GPU type, count, hosts, pin, hold."""

    plan_id: int
    job_id: str
    constraints: Constraints


@dataclass(frozen=True, slots=True)
class DropEdit:
    """Forget what the user fixed for a job on the Plan screen (its type, count, hosts, hold):
    plans from then on place it freely. An edit otherwise lasts, so that no later plan undoes it."""

    job_id: str


@dataclass(frozen=True, slots=True)
class Replan:
    """Plan again now, rejected plans included: after a reject nothing is proposed again
    until something changes, and the user may want to see the plan for the queue anyway."""


@dataclass(frozen=True, slots=True)
class SubmitJob:
    spec_path: str


@dataclass(frozen=True, slots=True)
class UpdateJobs:
    """Give submitted jobs the changed specs of these files (a file, directory or glob), by name."""

    spec_path: str


@dataclass(frozen=True, slots=True)
class CancelJob:
    job_id: str


@dataclass(frozen=True, slots=True)
class RetryJob:
    """Queue a failed or cancelled job again, from its last checkpoint."""

    job_id: str


@dataclass(frozen=True, slots=True)
class DrainHost:
    host: str
    drained: bool = True


@dataclass(frozen=True, slots=True)
class ConnectHost:
    host: str


@dataclass(frozen=True, slots=True)
class TrustHostKey:
    host: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class SetPolicy:
    name: str


@dataclass(frozen=True, slots=True)
class SetAutoApprove:
    enabled: bool


Intent = (
    ApprovePlan | RejectPlan | Replan | EditJob | DropEdit | SubmitJob | UpdateJobs | CancelJob | RetryJob | DrainHost
    | ConnectHost | TrustHostKey | SetPolicy | SetAutoApprove
)
