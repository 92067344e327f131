"""Plan screen: the pending plan beside the current allocation; approve, reject, tweak, auto-approve."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from heet_tui.core.gpu import type_allowed
from heet_tui.core.intents import ApprovePlan, EditJob, RejectPlan, Replan, SetAutoApprove
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.dialogs.tweak import NO_PLAN, TweakDialog
from heet_tui.ui.screens.base import SnapshotScreen
from heet_tui.ui.widgets.keyed_table import KeyedTable
from heet_tui.ui.widgets.plan_table import PlanTable, summary
from heet_tui.ui.widgets.screen_footer import ScreenFooter
from heet_tui.ui.widgets.status_line import StatusLine

NEEDS_PLAN = frozenset({"approve", "reject"})  # tweak too makes one, for a job left waiting
# Seconds after another plan took the screen's place in which a and r decide nothing: with a new
# proposal every few seconds on a big cluster, a approved the plan that came last, unread.
JUST_REPLACED_S = 2.0


class PlanScreen(SnapshotScreen):
    # auto height: on an 80-column terminal the summary wraps to 3-4 lines, and a fixed 3 cut
    # off "(waiting jobs then queue for GPUs in order)" and the auto-approve state
    DEFAULT_CSS = ("PlanScreen #plan-summary { height: auto; min-height: 3; max-height: 7; padding: 0 1; "
                   "border-bottom: solid $primary; }")
    FOOTER_OPTIONAL = ("replan", "toggle_auto")  # in the help; left out where every key would not fit
    BINDINGS = [
        Binding("a", "approve", "Approve"),
        Binding("r", "reject", "Reject"),
        Binding("e", "tweak", "Tweak"),
        Binding("t", "toggle_auto", "Auto"),
        Binding("p", "replan", "Replan"),
    ]

    _summary: Text | None = None
    _shown: int | None = None  # the id of the plan on screen (None: none)
    _shown_since = 0.0  # when the one on screen took its place (the app's clock)
    _shown_before: int | None = None  # the last other plan that was on screen, and
    _before_until = 0.0  # when it was last before the user (replaced, or the screen left)
    _hidden_at: float | None = None  # when another screen took this one's place (None: shown since)

    def compose(self) -> ComposeResult:
        yield StatusLine("Plan")
        yield Static(id="plan-summary")
        yield PlanTable(id="plan")
        yield ScreenFooter()

    def render_snapshot(self, snap: Snapshot) -> None:
        text = summary(snap)
        if text != self._summary:
            self._summary = text
            self.query_one("#plan-summary", Static).update(text)
        self.query_one(PlanTable).show(snap)
        self._note_shown(snap.plan_id if snap.plan is not None else None)
        self.refresh_bindings_when(self._pending())  # no pending plan: no approve key

    def _note_shown(self, plan_id: int | None) -> None:
        """Remember which plan the user has before them, since when, and which one was before them
        until when (a moment with none between them counts: #7 applied, then #9 proposed, is a
        new plan too)."""
        now = self.app.clock()  # type: ignore[attr-defined]
        if plan_id != self._shown:
            if self._shown is not None:
                self._shown_before = self._shown
                self._before_until = self._hidden_at if self._hidden_at is not None else now
            self._shown, self._shown_since = plan_id, now
        self._hidden_at = None

    def on_screen_suspend(self) -> None:
        # snapshots are not drawn while another screen is shown: the plan on this one was last
        # before the user now, however much later the next plan is drawn here
        self._hidden_at = self.app.clock()  # type: ignore[attr-defined]

    def _just_replaced(self, verb: str) -> bool:
        """Whether the plan on screen came too recently for ``verb`` to be meant for it, after
        another was on screen, in which case the user is told so and it is not sent."""
        shown, before = self._shown, self._shown_before
        if shown is None or before is None or before == shown:
            return False
        if self.app.clock() - self._shown_since >= JUST_REPLACED_S:  # type: ignore[attr-defined]
            return False
        key = "a" if verb == "approve" else "r"
        # "replaced #4" only of a plan the user had before them a moment ago: said of #4 applied
        # long before, or of one that gave way while another screen was shown, it was untrue
        if self._shown_since - self._before_until <= JUST_REPLACED_S:
            came = f"has just replaced #{before}"
        else:
            came = "has only just appeared here"
        self.notify(f"plan #{shown} {came}: nothing done; look at it, then press {key} again to {verb} it",
                    severity="warning", timeout=6)
        return True

    def _pending(self) -> bool:
        snap = self.latest
        return snap is not None and snap.plan is not None and snap.plan_id is not None and not snap.plan.is_empty

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in NEEDS_PLAN or action in ("tweak", "toggle_auto", "replan"):
            if self.read_only:
                return False
            # the footer shows only what is possible now: no pending plan, no approve key
            if action in NEEDS_PLAN and not self._pending():
                return False
            if action == "tweak" and self.query_one(PlanTable).selected_key is None:
                return False
            if action == "tweak" and not self._pending() and self.query_one(PlanTable).selected_key not in {
                    j.id for j in (self.latest.jobs if self.latest else ()) if not j.state.terminal}:
                return False
        return True

    def on_keyed_table_row_highlighted(self, _: KeyedTable.RowHighlighted) -> None:
        self.refresh_bindings()

    def action_approve(self) -> None:
        """Approves the plan on screen (not the latest to arrive), unless it has only just come."""
        if self._shown is not None and not self._just_replaced("approve"):
            self.request(ApprovePlan(self._shown), f"approve plan #{self._shown}")

    def action_reject(self) -> None:
        """As approve: rejecting an unread plan leaves nothing proposed until something changes."""
        if self._shown is not None and not self._just_replaced("reject"):
            self.request(RejectPlan(self._shown), f"reject plan #{self._shown}")

    def action_replan(self) -> None:
        self.request(Replan(), "plan again")

    def action_toggle_auto(self) -> None:
        snap = self.latest
        enabled = not (snap.auto_approve if snap else False)
        self.request(SetAutoApprove(enabled), "auto-approve " + ("on" if enabled else "off"))

    def action_tweak(self) -> None:
        snap = self.latest
        job_id = self.query_one(PlanTable).selected_key
        if snap is None or job_id is None:
            return
        job = next((j for j in snap.jobs if j.id == job_id), None)
        if job is None:
            self.notify(f"{job_id} is no longer in the queue", severity="warning")
            return
        # only what its spec allows: an edit narrows the spec's gpu_types, it cannot widen them
        types = tuple(sorted({h.gpu_type for h in snap.hosts if h.gpu_type and type_allowed(h.gpu_type, job.gpu_types)}))
        if snap.plan is not None and snap.plan_id is not None:
            dialog = TweakDialog(snap.plan_id, job, types, snap.plan.allocations.get(job_id), snap.plan.effect,
                                 job.edit)
        else:  # nothing pending: the edit proposes a plan (NO_PLAN)
            dialog = TweakDialog(NO_PLAN, job, types, job.allocation, None, job.edit)

        def done(edit: EditJob | None) -> None:
            if edit is not None:
                self.request(edit, f"tweak {edit.job_id}")

        self.app.push_screen(dialog, done)
