"""Plans: the allocations a policy proposes, the diff against now, and the predicted effect."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from heet_tui.core.allocation import Allocation
from heet_tui.core.durations import duration


class ChangeKind(StrEnum):
    START = "start"
    STOP = "stop"
    GROW = "grow"
    SHRINK = "shrink"
    MIGRATE = "migrate"


@dataclass(frozen=True, slots=True)
class Change:
    """One step of a plan. ``before``/``after`` are ``None`` for a start/stop."""

    job_id: str
    kind: ChangeKind
    before: Allocation | None
    after: Allocation | None

    @property
    def needs_restart(self) -> bool:
        """Every change but a start of a queued job pauses a running job."""
        return self.kind is not ChangeKind.START


def classify(before: Allocation | None, after: Allocation | None) -> ChangeKind | None:
    """How ``before`` becomes ``after``; ``None`` when nothing changes.

    A change of type or of hosts with the same count is a migrate; a count change on a
    subset/superset of the same hosts is grow/shrink; a count change that also moves to
    other hosts is classified by count (grow/shrink), since the restart costs the same.
    """
    if before is None or before.num_gpus == 0:
        return None if after is None or after.num_gpus == 0 else ChangeKind.START
    if after is None or after.num_gpus == 0:
        return ChangeKind.STOP
    if before.gpu_type == after.gpu_type and before.hosts == after.hosts:
        return None
    if before.gpu_type != after.gpu_type or after.num_gpus == before.num_gpus:
        return ChangeKind.MIGRATE
    return ChangeKind.GROW if after.num_gpus > before.num_gpus else ChangeKind.SHRINK


def diff(current: Mapping[str, Allocation], proposed: Mapping[str, Allocation]) -> tuple[Change, ...]:
    """The changes that turn ``current`` into ``proposed``, ordered stops first.

    Stops and shrinks come first so the GPUs they free exist before starts and grows claim
    them; within a kind, by job id, so the order is deterministic.
    """
    order = {ChangeKind.STOP: 0, ChangeKind.SHRINK: 1, ChangeKind.MIGRATE: 2, ChangeKind.GROW: 3, ChangeKind.START: 4}
    changes = []
    for job_id in sorted(set(current) | set(proposed)):
        before, after = current.get(job_id), proposed.get(job_id)
        kind = classify(before, after)
        if kind is not None:
            changes.append(Change(job_id, kind, before, after))
    return tuple(sorted(changes, key=lambda c: (order[c.kind], c.job_id)))


@dataclass(frozen=True, slots=True)
class JobPrediction:
    """What a plan is predicted to do to one job."""

    job_id: str
    throughput_before: float
    throughput_after: float
    completion_s: float | None  # seconds from now until done; None when unknown/never
    restart_pause_s: float
    # a job the plan leaves waiting: when (seconds from now) and on which GPU type the queue
    # is predicted to start it; None when it holds GPUs or no start is foreseen
    starts_in_s: float | None = None
    starts_on: str | None = None
    # how far off throughput_after (and so completion_s) may be, relative: 0 measured (or not
    # known to the maker of the prediction), the profiling model's spread, None a rough guess
    after_spread: float | None = 0.0
    # where the plan puts it ("4xA100 on a[0,1]"), None when it gets no GPUs: a preview of a tweak
    # that left the type or hosts to the policy gave its speed without saying on what
    placed_on: str | None = None


MUCH_LATER_S = 300.0  # a job's delay said beside the average: 5 minutes at least, and a quarter of its time
ROUGH_GUESS = ("a rough guess from how other jobs scaled here, until some job is measured in 6 configurations "
               "(docs/PROFILING.md)")


def spread(relative: float | None) -> str:
    """A prediction's spread as the UI and the CLI show it: "±12%", or "±?" where no model says
    how far off a guess may be."""
    return "±?" if relative is None else f"±{relative * 100:.0f}%"


@dataclass(frozen=True, slots=True)
class PredictedEffect:
    jobs: tuple[JobPrediction, ...] = ()
    avg_jct_s: float | None = None
    avg_jct_before_s: float | None = None
    at: float | None = None  # the clock time the prediction is for: JCTs count age, so they age with it

    def for_job(self, job_id: str) -> JobPrediction | None:
        for p in self.jobs:
            if p.job_id == job_id:
                return p
        return None

    def against(self) -> str:
        """" with this plan, 5m09s without it": what the average JCT is compared with, said.

        "Without it" is the current allocation run on, waiting jobs taking GPUs in submission
        order as they free up (scheduling.evaluate). Often the two were the same figure (a
        first plan starting one job where queueing would start it too), which read as "this
        plan gains nothing"."""
        before, after = self.avg_jct_before_s, self.avg_jct_s
        if before is None or after is None:
            return ""
        # a job the plan stops (held) has no completion, so it left the average unsaid: "1m48s with this
        # plan, 1m44s without it: worse" counted one job against two
        left = sorted(p.job_id for p in self.jobs if p.throughput_before > 0 and p.completion_s is None
                      and p.starts_in_s is None)
        # a waiting job no queue starts (held, or too big) is in neither average: unsaid, "as without it:
        # queueing would start the waiting jobs the same way" was read as counting the held one too
        never = sorted(p.job_id for p in self.jobs if p.throughput_before <= 0 and p.completion_s is None
                       and p.starts_in_s is None)
        return self._against(before, after, left) + (
            f"; neither counts {', '.join(never)} (held, or no start foreseen)" if never else "")

    def _against(self, before: float, after: float, left: list[str]) -> str:
        if left:
            return (f" with this plan, without {', '.join(left)} (stopped by it: no completion to count); "
                    f"{duration(before)} without the plan, counting {'it' if len(left) == 1 else 'them'}")
        queue = any(p.throughput_before == 0 for p in self.jobs)
        # a running job it pauses until GPUs free again (a preemption for priority): queueing in
        # order would not have stopped it, which "the same way" said
        paused = sorted(p.job_id for p in self.jobs if p.throughput_before > 0 and p.throughput_after <= 0)
        if abs(before - after) <= 0.005 * max(before, after):
            if paused:
                return (f" with this plan, as without it by this average, which weighs every job alike: the jobs "
                        f"it starts gain what it costs {', '.join(paused)}, stopped until GPUs free again")
            return (" with this plan, as without it" + (": queueing for GPUs in order would start the waiting jobs "
                                                        "the same way" if queue else ""))
        # any plan this average calls worse says so in words (red alone went unnoticed: 1m54s against
        # 1m50s was approved); heet weighs priorities too: say why such a plan is proposed
        worse = ": worse by this average, which weighs every job alike and is not what the policy decides by" \
            if after > before else ""
        return f" with this plan, {duration(before)} without it" + (
            " (waiting jobs then queue for GPUs in order)" if queue else "") + worse

    def most_delayed(self) -> tuple[str, float, float, float] | None:
        """The running job the plan delays most, where that is worth saying, with the delay and its
        completion without and with the plan (s): an average of 3h36m, ruled by a 33-hour job, read
        "as without it" while a job 2 minutes from its end was shrunk to finish 37 minutes later.
        Its time without the plan is its remaining work at today's speed."""
        worst: tuple[str, float, float, float] | None = None
        for p in self.jobs:
            if p.throughput_before <= 0 or p.throughput_after <= 0 or p.completion_s is None:
                continue
            before = max(0.0, p.completion_s - p.restart_pause_s) * p.throughput_after / p.throughput_before
            late = p.completion_s - before
            if late > max(MUCH_LATER_S, 0.25 * before) and (worst is None or late > worst[1]):
                worst = (p.job_id, late, before, p.completion_s)
        return worst

    def delay_said(self) -> str:
        """``most_delayed`` in words, as the Plan screen, ``plan show`` and ``run`` say it ("" for none)."""
        if (worst := self.most_delayed()) is None:
            return ""
        job_id, late, before, after = worst
        return f"it delays {job_id} by {duration(late)}: done in {duration(after)}, not {duration(before)}"


def count_changes(changes: tuple[Change, ...]) -> str:
    """"2 grow, 5 start": what a plan does, by kind."""
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.kind.value] = counts.get(change.kind.value, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no changes"


@dataclass(frozen=True, slots=True)
class Plan:
    """Proposed allocations for every job that should hold GPUs, with the diff to apply."""

    allocations: Mapping[str, Allocation]
    changes: tuple[Change, ...]
    effect: PredictedEffect = field(default_factory=PredictedEffect)
    policy: str = ""
    created_at: float = 0.0

    @staticmethod
    def build(
        current: Mapping[str, Allocation],
        proposed: Mapping[str, Allocation],
        policy: str = "",
        now: float = 0.0,
        effect: PredictedEffect | None = None,
    ) -> Plan:
        proposed = {j: a for j, a in proposed.items() if a.num_gpus > 0}
        return Plan(dict(proposed), diff(current, proposed), effect or PredictedEffect(), policy, now)

    @property
    def is_empty(self) -> bool:
        return not self.changes
