"""Tweak one job of the pending plan (GPU type, count, hosts, pin, hold) with a live prediction.

Every edit schedules a preview a moment later (edits in quick succession collapse into one);
the preview runs in a worker through ``Backend.preview``, so the solver never blocks typing.
Nothing is applied until the user presses Apply.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from heet_tui.core.allocation import Allocation
from heet_tui.core.intents import EditJob
from heet_tui.core.job import gpu_range
from heet_tui.core.plan import Plan, PredictedEffect
from heet_tui.core.sched_input import Constraints
from heet_tui.core.snapshot import JobStatus
from heet_tui.ui.dialogs.base import DialogBody, DialogBox, FormDialog, dialog_foot
from heet_tui.ui.format import duration, rate, signed_percent
from heet_tui.ui.widgets.marked_checkbox import MarkedCheckbox
from heet_tui.ui.widgets.screen_footer import ScreenFooter

PREVIEW_DELAY_S = 0.15
NO_PLAN = 0  # the plan id of a tweak made with none pending: the controller proposes one with it


class TweakDialog(FormDialog[EditJob | None]):
    DEFAULT_CSS = """
    TweakDialog DialogBox { width: 80; padding: 0 2; }
    TweakDialog .row { height: auto; margin-bottom: 1; }
    TweakDialog .field { width: 14; }
    TweakDialog Input, TweakDialog Select { width: 1fr; }
    TweakDialog #prediction { height: auto; min-height: 4; border: round $primary; padding: 0 1; }
    TweakDialog #plan-note { height: auto; color: $warning; margin-bottom: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+s", "apply", "Apply")]
    HINT = "enter: next field\nctrl+s: apply\nesc: cancel"

    def __init__(self, plan_id: int, job: JobStatus, gpu_types: tuple[str, ...], proposed: Allocation | None,
                 baseline: PredictedEffect | None = None, current: Constraints | None = None) -> None:
        super().__init__()
        self.plan_id, self.job, self.gpu_types, self.proposed = plan_id, job, gpu_types, proposed
        self.baseline = baseline or PredictedEffect()
        self.initial = current or Constraints()
        self._timer: Timer | None = None
        self.last_effect: PredictedEffect | None = None
        self.previews = 0
        self._refused: EditJob | None = None  # the edit whose preview the controller refused
        self._previewed: EditJob | None = None  # the edit whose preview it accepted
        self._apply_after: EditJob | None = None  # applied when its preview is accepted

    def compose(self) -> ComposeResult:
        c = self.initial
        with DialogBox():
            named = f"{self.job.name}, " if self.job.name != self.job.id else ""
            yield Label(f"Tweak {self.job.id} ({named}{gpu_range(self.job.min_gpus, self.job.max_gpus)})",
                        classes="dialog-title")
            with DialogBody():
                yield Label(_proposed(self.proposed), classes="title", id="proposed")
                yield Static("", id="plan-note")
                with Horizontal(classes="row"):
                    yield Label("GPU type", classes="field")
                    yield Select([(t, t) for t in self.gpu_types], prompt="any type", id="type",
                                 value=c.pinned_type if c.pinned_type in self.gpu_types else Select.NULL, compact=True)
                with Horizontal(classes="row"):
                    yield Label("GPU count", classes="field")
                    yield Input(str(c.fixed_count or ""), placeholder="policy decides", id="count", type="integer",
                                valid_empty=True, compact=True)  # empty: the policy decides, not an error
                with Horizontal(classes="row"):
                    yield Label("Hosts", classes="field")
                    yield Input(",".join(c.pinned_hosts), placeholder="any hosts (comma-separated names)", id="hosts", compact=True)
                with Horizontal(classes="row"):
                    yield MarkedCheckbox("pin to the proposed placement", value=False, id="pin",
                                   disabled=self.proposed is None, compact=True)
                    yield MarkedCheckbox("hold (no GPUs)", value=c.held, id="hold", compact=True)
                yield Static("prediction: …", id="prediction", markup=False)
            # docked: the error line and the buttons stay in view however far the fields scroll
            yield dialog_foot(Button("Cancel", id="cancel"), Button("Apply", id="apply", variant="primary"),
                              hint=self.HINT, error_id="error")
        yield ScreenFooter()  # its own keys: the screen's below read "a Approve" under the form

    def on_mount(self) -> None:
        note = self.query_one("#plan-note", Static)
        note.display = self.plan_id == NO_PLAN
        note.update("no plan is pending: Apply proposes one with this edit")
        self._schedule()

    def plan_changed(self, plan_id: int | None, plan: Plan | None) -> None:
        """A newer snapshot's plan: compared with it from now on, and said. The dialog kept
        comparing with the plan it was opened on, two plans later, and read like the screen's."""
        if plan_id == self.plan_id or (plan_id is None and self.plan_id == NO_PLAN):
            return
        note = self.query_one("#plan-note", Static)
        note.display = True
        if plan is None or plan_id is None:
            note.update(f"plan #{self.plan_id} is no longer pending (applied, rejected or withdrawn): Apply proposes "
                        "a new plan with this edit")
            self.plan_id, self.baseline = NO_PLAN, PredictedEffect()
            return
        before = f"plan #{self.plan_id} was replaced by #{plan_id}" if self.plan_id != NO_PLAN else \
            f"plan #{plan_id} was proposed meanwhile"
        note.update(f"{before}: compared with #{plan_id} now, and Apply edits it")
        self.plan_id, self.baseline = plan_id, plan.effect
        self.proposed = plan.allocations.get(self.job.id)
        self.query_one("#proposed", Label).update(_proposed(self.proposed))
        self._schedule()

    def constraints(self) -> Constraints:
        """The form as constraints; raises ``ValueError`` with a message for a bad field."""
        if self.query_one("#hold", Checkbox).value:
            return Constraints(held=True)
        chosen = self.query_one("#type", Select).value
        pinned_type = chosen if isinstance(chosen, str) else None
        raw = self.query_one("#count", Input).value.strip()
        count = None
        if raw:
            count = int(raw)
            if not self.job.min_gpus <= count <= self.job.max_gpus:
                raise ValueError(f"GPU count must be from {self.job.min_gpus} to {self.job.max_gpus}")
        hosts = tuple(h.strip() for h in self.query_one("#hosts", Input).value.split(",") if h.strip())
        return Constraints(pinned_type=pinned_type, fixed_count=count, pinned_hosts=hosts)

    def edit(self) -> EditJob:
        return EditJob(self.plan_id, self.job.id, self.constraints())

    def on_input_changed(self, _: Input.Changed) -> None:
        self._schedule()

    def on_select_changed(self, _: Select.Changed) -> None:
        self._schedule()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "pin" and event.value and self.proposed is not None:
            # Pinning copies the proposal into the fields, so the user sees exactly what is fixed.
            self.query_one("#type", Select).value = self.proposed.gpu_type
            self.query_one("#count", Input).value = str(self.proposed.num_gpus)
            self.query_one("#hosts", Input).value = ",".join(self.proposed.host_names)
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(PREVIEW_DELAY_S, self._preview)

    def _preview(self) -> None:
        error = self.query_one("#error", Static)
        try:
            edit = self.edit()
        except ValueError as exc:
            error.update(str(exc))
            return
        error.update("")
        self.query_one("#prediction", Static).update("prediction: re-evaluating the plan…")
        self._run_preview(edit)

    @work(exclusive=True, group="preview")
    async def _run_preview(self, edit: EditJob) -> None:
        try:
            effect = await self.app.preview(edit)  # type: ignore[attr-defined]
        except ValueError as exc:
            self.query_one("#error", Static).update(str(exc))
            self.query_one("#prediction", Static).update("prediction: not available")
            self._refused, self._apply_after = edit, None
            return
        except Exception:
            if self._apply_after == edit:  # no preview to be had (the controller is away): the apply says
                self.dismiss(edit)
            raise
        self._refused, self._previewed = None, edit
        if self._apply_after == edit:
            self.dismiss(edit)
            return
        self.previews += 1
        self.last_effect = effect
        self.query_one("#prediction", Static).update(describe_effect(effect, self.job.id, self.baseline))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        else:
            self.action_cancel()

    def action_apply(self) -> None:
        try:
            edit = self.edit()
        except ValueError as exc:
            self.query_one("#error", Static).update(str(exc))
            return
        if edit == self._refused:  # the preview was refused, as the apply would be: the form stays to fix
            return
        if edit == self._previewed:
            self.dismiss(edit)
            return
        # typed and applied before its preview came back: it closed on an edit the controller then
        # refused (the form lost, the refusal a toast); applied once the preview accepts it
        if self._timer is not None:
            self._timer.stop()
        self._apply_after = edit
        self.query_one("#error", Static).update("")
        self.query_one("#prediction", Static).update("prediction: checking the edit before applying it…")
        self._run_preview(edit)

    def action_cancel(self) -> None:
        self.dismiss(None)


def describe_effect(effect: PredictedEffect, job_id: str, baseline: PredictedEffect) -> str:
    """The tweaked plan next to the plan as proposed: what the user is choosing between."""
    pred, before = effect.for_job(job_id), baseline.for_job(job_id)
    lines = []
    if pred is None:
        lines.append(f"{job_id}: gets no GPUs in this plan")
    else:
        proposed = f"{rate(before.throughput_after)} as proposed, " if before is not None else ""
        now = ("not running now" if pred.throughput_before <= 0
               else f"{signed_percent(pred.throughput_before, pred.throughput_after)} vs now")
        lines.append(f"{job_id}: {proposed}{rate(pred.throughput_after)} with this tweak ({now})")
        if pred.placed_on:  # with the type or hosts left to the policy, the speed alone did not say where
            moved = before is not None and before.placed_on and before.placed_on != pred.placed_on
            lines.append(f"on {pred.placed_on}" + (f" (proposed: {before.placed_on})" if moved else ""))
        lines.append(f"completes in {duration(pred.completion_s)}"
                     + (f" (proposed: {duration(before.completion_s)})" if before is not None else "")
                     + f", restart pause {duration(pred.restart_pause_s)}")
    # A held job has no completion, so it leaves the average: without a word, holding one read as
    # a plan five times better.
    counted = {p.job_id for p in baseline.jobs if p.completion_s is not None}
    left = sorted(counted - {p.job_id for p in effect.jobs if p.completion_s is not None})
    lines.append(f"plan average JCT {duration(baseline.avg_jct_s)} as proposed → "
                 f"{duration(same_clock_avg_jct(effect, baseline))} with this tweak"
                 + (f", without {', '.join(left)} (no GPUs, so no completion to count)" if left else ""))
    return "prediction:\n" + "\n".join(lines)


def same_clock_avg_jct(effect: PredictedEffect, baseline: PredictedEffect) -> float | None:
    """The tweak's average JCT on the proposed plan's clock.

    A JCT counts each job's age, so a preview computed a minute after the plan was proposed
    reads a minute longer with no change at all; it is shifted back by the time between the
    two. (Shifting by the change in the current state's JCT instead, as before, also took off
    what the tweak itself changed there: pinning a waiting job to a slow type showed a plan a
    minute better than proposed while its own job took twice as long.)
    """
    if effect.avg_jct_s is None or effect.at is None or baseline.at is None:
        return effect.avg_jct_s
    return effect.avg_jct_s - (effect.at - baseline.at)


def _proposed(alloc: Allocation | None) -> str:
    return f"proposed: {alloc.num_gpus}x{alloc.gpu_type} on {', '.join(alloc.host_names)}" if alloc else "proposed: no GPUs"
