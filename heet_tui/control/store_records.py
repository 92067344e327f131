"""What the state store hands out: plain records of its rows, free of SQLite."""

from __future__ import annotations

from dataclasses import dataclass

from heet_tui.core.job import Job
from heet_tui.core.plan import Change, Plan


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as stored: the domain ``Job`` plus what only the controller needs."""

    job: Job
    checkpoint: str | None
    generation: int
    cancel_requested: bool
    crashes: int
    relaunch_requested: bool = False  # heet-tui update changed what its processes were started with
    spec_file: str = ""  # the file its spec was last read from (submit or update); "" when not known


@dataclass(frozen=True, slots=True)
class PlanRecord:
    id: int
    plan: Plan
    status: str
    edits: dict
    created_at: float


@dataclass(frozen=True, slots=True)
class StepRecord:
    plan_id: int
    idx: int
    change: Change
    status: str  # pending | running | done | failed
    message: str


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: int
    at: float
    kind: str
    job_id: str | None
    host: str | None
    message: str
