"""A pending plan as a diff per job: current vs proposed allocation and the predicted effect."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.text import Text

from heet_tui.core.allocation import Allocation
from heet_tui.core.job import (
    JobState,
)
from heet_tui.core.plan import ROUGH_GUESS, ChangeKind, JobPrediction, Plan, count_changes, spread
from heet_tui.core.snapshot import Snapshot, starts_without_checkpoint
from heet_tui.core.waiting import some, why_waiting
from heet_tui.ui.format import ID_WIDTH, clock, duration, rate, short_id, signed_percent
from heet_tui.ui.widgets.keyed_table import Cells, KeyedTable

COLUMNS = (("job", "Job"), ("change", "Change"), ("current", "Current"), ("proposed", "Proposed"),
           ("tput", "Throughput"), ("delta", "Δ"), ("done", "Done in"), ("pause", "Pause"))
# Narrower than this, a row leaves out host names and the speed before (Δ says the change): at 80
# columns the restart pause, what a change costs, was off the screen and Completes in cut short
COMPACT_BELOW = 100
# The most the six other columns and the gaps take (a 24-character id, "1.2k/s → 790/s ±12%", ...):
# what is left of the width, halved, is the room of Current and Proposed
OTHER_COLUMNS = 85

EDITED = " ✎"  # after a job the user fixed something for (`e`): later plans keep to it

_KIND_STYLE = {ChangeKind.START: "bold green", ChangeKind.STOP: "bold red", ChangeKind.GROW: "green",
               ChangeKind.SHRINK: "yellow", ChangeKind.MIGRATE: "cyan"}
_KIND_ORDER = {ChangeKind.START: 0, ChangeKind.GROW: 1, ChangeKind.MIGRATE: 2, ChangeKind.SHRINK: 3,
               ChangeKind.STOP: 4, None: 5}


def short_alloc(alloc: Allocation | None, limit: int = 1, room: int = 0) -> str:
    """One host and a count of the rest: two host names widened Current and Proposed to 50
    columns on every row, pushing the figures off a 100-column screen (e shows them all);
    ``limit`` 0: the count and type alone. A job over exactly two hosts names both where that
    fits in ``room`` characters ("2xT4 @b +1" hid the second at 160 columns)."""
    if alloc is None or alloc.num_gpus == 0:
        return "-"
    size = f"{alloc.num_gpus}x{alloc.gpu_type}"
    if limit == 0:
        return size
    names = alloc.host_names
    if len(names) == 2 and len(both := f"{size} @{names[0]},{names[1]}") <= room:
        return both
    where = ",".join(names[:limit]) + (f" +{len(names) - limit}" if len(names) > limit else "")
    return f"{size} @{where}"


def allocation_room(width: int) -> int:
    """The characters an allocation cell may take in a table ``width`` columns wide."""
    return max(0, (width - OTHER_COLUMNS) // 2)


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One job's line of the diff; compared by value so an unchanged line is never redrawn."""

    job_id: str
    kind: ChangeKind | None
    before: Allocation | None
    after: Allocation | None
    prediction: JobPrediction | None
    waiting: bool = False  # a queued job the plan leaves waiting
    edited: bool = False  # the user fixed its type, count, hosts or hold on this screen (until dropped)


def plan_rows(plan: Plan) -> dict[str, PlanRow]:
    """Changed jobs first (by kind), then jobs the plan leaves as they are (before == after for
    those), then the queued jobs it leaves waiting, with the start the plan predicts for them:
    a plan that held a job back for faster GPUs showed nothing of it."""
    kinds = {c.job_id: c for c in plan.changes}
    predictions = {p.job_id: p for p in plan.effect.jobs}
    job_ids = sorted(set(kinds) | set(plan.allocations), key=lambda j: (_KIND_ORDER[kinds[j].kind if j in kinds
                                                                                    else None], j))
    rows = {}
    for job_id in job_ids:
        change = kinds.get(job_id)
        after = change.after if change else plan.allocations.get(job_id)
        before = change.before if change else after
        rows[job_id] = PlanRow(job_id, change.kind if change else None, before, after, predictions.get(job_id))
    for pred in sorted(plan.effect.jobs, key=lambda p: p.job_id):
        if pred.job_id not in rows:
            rows[pred.job_id] = PlanRow(pred.job_id, None, None, None, pred, waiting=True)
    return rows


def current_rows(snap: Snapshot) -> dict[str, PlanRow]:
    """With no plan pending, the allocation that stands, as "keep" lines with the measured speed
    and ETA (the table was empty under "the current allocation stands")."""
    running = sorted((j for j in snap.jobs if j.allocation is not None and not j.state.terminal), key=lambda j: j.id)
    rows = {j.id: PlanRow(j.id, None, j.allocation, j.allocation,
                          JobPrediction(j.id, j.throughput, j.throughput, j.eta_s, 0.0)) for j in running}
    # and the queued ones, to tweak (e): a job held for faster GPUs could not be started by hand
    for j in sorted((j for j in snap.jobs if j.state is JobState.QUEUED and j.allocation is None), key=lambda j: j.id):
        rows[j.id] = PlanRow(j.id, None, None, None, JobPrediction(j.id, 0.0, 0.0, j.eta_s, 0.0), waiting=True)
    return rows


def plan_cells(row: PlanRow, compact: bool = False, room: int = 0) -> Cells:
    """``room``: the characters Current and Proposed may each take (two host names where they fit)."""
    pred = row.prediction
    name = short_id(row.job_id, ID_WIDTH - 2) + EDITED if row.edited else short_id(row.job_id)
    if row.waiting and pred is not None:
        starts = f"→ {pred.starts_on} in {duration(pred.starts_in_s)}" if pred.starts_on else "-"
        return (name, Text("wait", style="dim"), "-", starts, "-", "-", duration(pred.completion_s), "-")
    if pred is None:
        tput, delta, done, pause = "-", "-", "-", "-"
    else:
        tput = f"{rate(pred.throughput_before)} → {rate(pred.throughput_after)}" if not compact \
            else rate(pred.throughput_after)
        if pred.after_spread != 0 and pred.throughput_after > 0:  # not measured: say how sure
            tput += f" {spread(pred.after_spread)}"
        delta = signed_percent(pred.throughput_before, pred.throughput_after)
        done = duration(pred.completion_s)
        pause = duration(pred.restart_pause_s) if pred.restart_pause_s else "-"
    kind = row.kind
    label = Text(kind.value if kind else "keep", style=_KIND_STYLE[kind] if kind else "dim")
    hosts = 0 if compact else 1
    return (name, label, short_alloc(row.before, hosts, room), short_alloc(row.after, hosts, room), tput, delta,
            done, pause)


def drains_carried_out(snap: Snapshot) -> list[str]:
    """The drained hosts the pending plan moves or stops jobs off: the plan is the drain's doing."""
    if snap.plan is None:
        return []
    drained = {h.name for h in snap.hosts if h.drained}
    return sorted({host for c in snap.plan.changes if c.before is not None for host in c.before.host_names
                   if host in drained and (c.after is None or host not in c.after.host_names)})


def summary(snap: Snapshot) -> Text:
    text = Text()
    plan = snap.plan
    if (plan is None or snap.plan_id is None) and snap.applying_plan is not None:
        # its jobs read as "waiting with nothing proposed (left out by the policy ...)" meanwhile;
        # and a plan of starts alone, with nothing running, read as if jobs were being stopped
        doing = "queued jobs start" if snap.applying_restarts == 0 else "jobs stop, save a checkpoint and start again"
        text.append(f"Applying plan #{snap.applying_plan}: {doing}; the Jobs screen and each job's events (its details) show each step.",
                    style="dim")
        return text
    if plan is None or snap.plan_id is None:
        text.append("No plan pending: the current allocation stands.", style="dim")
        text.append(why_waiting(snap), style="dim")
        return text
    text.append(f"Plan #{snap.plan_id}", style="bold")
    text.append(f" by {plan.policy or snap.policy}, proposed at {clock(plan.created_at, snap.mode)}")
    text.append("  " + count_changes(plan.changes))
    restarts = sum(1 for c in plan.changes if c.needs_restart)
    text.append(f"  restarts {restarts}")
    if snap.auto_approve and snap.held_why:  # "ON: plans apply without asking" read wrong under a held plan
        text.append(f"   auto-approve ON, but this plan waits for you: {snap.held_why}", style="yellow")
    else:
        text.append("   auto-approve " + ("ON: plans apply without asking" if snap.auto_approve else "off"))
    effect = plan.effect
    if effect.avg_jct_s is not None:
        # "Without it" is the current allocation run on, waiting jobs queueing in submission order
        # for GPUs as they free up (scheduling.evaluate): say so, or a first plan reads as a miracle.
        text.append("\npredicted average JCT ", style="bold")
        text.append(duration(effect.avg_jct_s), style="bold green" if (effect.avg_jct_before_s or 1e18)
                    >= effect.avg_jct_s else "bold red")
        text.append(effect.against())
        if effect.avg_jct_before_s is not None and effect.avg_jct_s > effect.avg_jct_before_s:
            if drains := drains_carried_out(snap):
                # a drain's plan costs what the drain costs: "r rejects it" pushed the user to reject
                # the plan that carries out the drain they asked for
                text.append(f"; it carries out the drain of {', '.join(drains)} (the cost is the drain's)",
                            style="yellow")
            else:
                text.append(" (r rejects it)", style="bold red")  # against() said why it is worse
    if delay := effect.delay_said():  # with or without an average to set it beside
        text.append(f"\n{delay}", style="bold yellow")
    if effect.avg_jct_s is not None and (
            guesses := [p.job_id for p in effect.jobs if p.after_spread is None and p.throughput_after > 0]):
        text.append(f"\n±? on {some(guesses)}: {ROUGH_GUESS}", style="dim")
    if behind := starts_without_checkpoint(snap):
        text.append(f"\n{behind}", style="bold yellow")
    return text


class PlanTable(KeyedTable):
    def __init__(self, **kwargs) -> None:
        super().__init__(COLUMNS, **kwargs)
        self._rank: dict[str, int] = {}
        self._compact = False
        self._room = 0

    def on_resize(self) -> None:
        compact, room = self.size.width < COMPACT_BELOW, allocation_room(self.size.width)
        if (compact, room) != (self._compact, self._room):
            self._compact, self._room = compact, room
            self.redraw_all()

    def on_mount(self) -> None:
        self.order_by(lambda job_id: self._rank.get(job_id, 1 << 30))

    def show(self, snap: Snapshot) -> None:
        rows = plan_rows(snap.plan) if snap.plan is not None else current_rows(snap)
        edited = {j.id for j in snap.jobs if j.edit.is_set}
        rows = {k: replace(r, edited=True) if k in edited else r for k, r in rows.items()}
        self._rank = {job_id: i for i, job_id in enumerate(rows)}
        self.sync(rows)

    def cells_for(self, key: str, source: PlanRow) -> Cells:
        return plan_cells(source, self._compact, self._room)
