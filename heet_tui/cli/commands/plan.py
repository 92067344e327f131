"""``heet-tui plan [approve|reject|again] [--id N]``: the pending plan, from the command line.

``heet-tui run`` without ``--auto-approve`` proposes plans and waits for a person; on a server
with no TUI open, the only way to approve one was to open the TUI. This asks the running
controller over its attach socket, as an attached TUI does. ``again`` plans now, as the TUI's p
does: after a reject nothing is proposed until something changes, and a headless admin had no
way to ask for a plan but to change a job.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from heet_tui.cli.commands.jobs import open_store, table_allocation
from heet_tui.cli.commands.plan_json import plan_obj
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.table import aligned
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.remembered import remembered_auto_approve
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store_records import StepRecord
from heet_tui.core.durations import duration
from heet_tui.core.intents import ApprovePlan, RejectPlan, Replan
from heet_tui.core.plan import ROUGH_GUESS, JobPrediction, Plan, PredictedEffect, count_changes, spread
from heet_tui.core.snapshot import starts_without_checkpoint
from heet_tui.core.waiting import why_waiting

REPLY_TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="show, approve or reject the pending plan, or plan again now (through the running "
                                    "controller)")
    add_location_options(p, reads_hosts=False)
    p.add_argument("action", nargs="?", choices=("show", "approve", "reject", "again"), default="show",
                   help="show the pending plan (the default), approve or reject it, or plan again now")
    p.add_argument("--id", type=int, metavar="N", help="act only if plan #N is the one pending (what you looked at); with show, any plan, past ones from the store")
    p.add_argument("--json", action="store_true", help="show only: the plan as JSON (figures as numbers, times in "
                                                       "seconds; plan is null when none is pending)")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    if args.json and args.action != "show":
        raise UsageError(f"--json is for plan show: plan {args.action} prints one line of what it did")
    store = open_store(args)
    if args.action == "show" and args.id is not None and store.plan(args.id) is None:  # "is not pending: no plan is"
        raise UsageError(f"no plan #{args.id} in {store.dir}")
    if args.action == "show" and args.id is not None and (rec := store.plan(args.id)) is not None \
            and (rec.status != "proposed" or controller_running(store.dir) is None):
        # a proposed plan with no controller: the one pending when it stopped, shown as stored (it said
        # "plans are made by a running one" of the very plan a script asked about)
        # a past plan, from the store: what it predicted, beside what became of each step (it said
        # "plan #4 is not pending", and comparing a prediction with the outcome meant reading SQLite)
        if args.json:
            print(json.dumps({"plan": plan_obj(rec.plan, rec.id, rec.plan.policy, rec.status, store.steps(rec.id)),
                              **_stored_mode(store)}, indent=2))
        else:
            when = ("pending when its controller stopped (approve it once one runs, if it still stands); proposed at"
                    if rec.status == "proposed" else f"{rec.status}; proposed at")
            _show(rec.plan, rec.id, rec.plan.policy, when, store.steps(rec.id))
        return 0
    if controller_running(store.dir) is None:
        if args.action == "show" and args.id is None:  # none pending is an answer, as with --json (it exited 1)
            print(json.dumps({"plan": None, **_stored_mode(store)}) if args.json else
                  f"no plan pending: no controller runs on {store.dir}, and plans are made by a running one "
                  "(heet-tui run)")
            return 0
        raise CliError(f"no controller runs on {store.dir}: plans are made by a running one (heet-tui run)")
    try:
        return asyncio.run(_plan(store.dir, args.action, args.id, args.json))
    except (ControllerGone, TimeoutError) as exc:
        raise CliError(str(exc) or "the controller did not answer in time") from None


def _stored_mode(store) -> dict[str, object]:
    """``plan show --json``'s other keys as the store has them: the same keys with or without a
    controller (without one it printed no JSON at all, and a past plan had only "plan")."""
    running = controller_running(store.dir) is not None
    return {"auto_approve": remembered_auto_approve(store), "read_only": False,
            "controller_running": running}


async def _plan(state_dir, action: str, expected: int | None, as_json: bool = False) -> int:
    backend = AttachedBackend(state_dir)
    await backend.start()
    try:
        if action == "again":
            if expected is not None:
                raise UsageError("--id is for approve and reject: plan again replaces whatever is pending")
            return await _post(backend, Replan())
        snap = await asyncio.wait_for(anext(backend.snapshots()), REPLY_TIMEOUT_S)
        if snap.store_error and not as_json:  # approving now is refused: said before the plan that reads as live
            print(f"heet-tui: {snap.store_error}: the controller changes nothing until it can write", file=sys.stderr)
        # a plan no longer pending is the state having moved on, not a mistyped command: exit 1, as with
        # nothing pending and no --id (it was 2, the usage code, and a script could not tell them apart)
        if (snap.plan is None or snap.plan_id is None) and expected is not None:
            raise CliError(f"plan #{expected} is not pending: no plan is (the current allocation stands)")
        if snap.plan is None or snap.plan_id is None:
            said = "no plan pending: the current allocation stands" + (" (auto-approve is on)" if snap.auto_approve
                                                                        else "")
            if action != "show":  # nothing to approve is a failure: it went to stdout, where a script reads data
                raise CliError(said)
            # why the queued jobs wait: after a reject it said only that the allocation stands
            if why := why_waiting(snap, "heet-tui jobs NAME", "heet-tui plan again proposes anew",
                                  "d on the TUI's Jobs screen drops it"):
                said += "." + why
            print(json.dumps({"plan": None, "auto_approve": snap.auto_approve, "read_only": snap.read_only,
                              "controller_running": True}) if as_json else said)
            return 0
        if expected is not None and expected != snap.plan_id:
            raise CliError(f"plan #{expected} is not the one pending (plan #{snap.plan_id} is): look at it first")
        if action == "show" and as_json:
            obj = plan_obj(snap.plan, snap.plan_id, snap.plan.policy or snap.policy, "proposed", snap=snap)
            print(json.dumps({"plan": obj, "auto_approve": snap.auto_approve, "read_only": snap.read_only,
                              "controller_running": True}, indent=2))
            return 0
        if action == "show":
            assert snap.plan is not None
            _show(snap.plan, snap.plan_id, snap.plan.policy or snap.policy, "proposed at")
            if behind := starts_without_checkpoint(snap):
                print(behind)
            if snap.read_only:  # it offered `plan approve`, which the controller then refused
                print("the controller is read-only: it proposes plans to look at and applies none (heet-tui run "
                      "without --read-only applies them)")
            else:
                print(f"approve: heet-tui plan approve --id {snap.plan_id}   reject: heet-tui plan reject --id "
                      f"{snap.plan_id}")
            return 0
        done = await _post(backend, ApprovePlan(snap.plan_id) if action == "approve" else RejectPlan(snap.plan_id))
        if expected is None:  # which plan that was: a newer one had replaced the one looked at, unsaid
            for c in snap.plan.changes:
                print(f"  {c.kind.value} {c.job_id}: {c.before.describe() if c.before else '-'} -> "
                      f"{c.after.describe() if c.after else '-'}")
        return done
    finally:
        await backend.stop()


async def _post(backend: AttachedBackend, intent: ApprovePlan | RejectPlan | Replan) -> int:
    try:
        print(await asyncio.wait_for(backend.post(intent), REPLY_TIMEOUT_S))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return 0


def predicted_jct(effect: PredictedEffect) -> str:
    """The plan's predicted average JCT against running on without it ("" when unknown)."""
    if effect.avg_jct_s is None:
        return ""
    return f"predicted average JCT {duration(effect.avg_jct_s)}{effect.against()}"


def _completes(pred: JobPrediction | None) -> str:
    """When the job is predicted to finish, and how sure that is when its new speed was not measured."""
    if pred is None:
        return "-"
    if pred.completion_s is None or pred.after_spread == 0:
        return duration(pred.completion_s)
    return f"{duration(pred.completion_s)} {spread(pred.after_spread)}"


def _show(plan: Plan, plan_id: int, policy: str, when: str, steps: list[StepRecord] | None = None) -> None:
    created = time.strftime("%H:%M:%S", time.localtime(plan.created_at))
    print(f"plan #{plan_id} by {policy}, {when} {created}: {count_changes(plan.changes)}")
    effect = plan.effect
    if said := predicted_jct(effect):
        print(said)
    if delay := effect.delay_said():  # with or without an average (none when a job has no prediction)
        print(delay)
    done = {step.change.job_id: step for step in steps or ()}
    rows = [("JOB", "CHANGE", "NOW", "PLANNED", "COMPLETES IN", *(("STEP",) if steps else ()))]
    for change in plan.changes:
        pred = effect.for_job(change.job_id)
        step = done.get(change.job_id)
        outcome = (f"{step.status}: {step.message}" if step.message else step.status) if step else "-"
        rows.append((change.job_id, change.kind.value,  # over many hosts, the short form (--json has all)
                     table_allocation(change.before.describe() if change.before else None),
                     table_allocation(change.after.describe() if change.after else None),
                     _completes(pred), *((outcome,) if steps else ())))
    # the jobs it leaves waiting, with the start it foresees, as the Plan screen shows them: a job
    # held for faster GPUs was on screen and nowhere here
    changed = {c.job_id for c in plan.changes}
    for pred in sorted(effect.jobs, key=lambda p: p.job_id):
        if pred.job_id not in changed and pred.job_id not in plan.allocations:
            starts = f"starts on {pred.starts_on} in {duration(pred.starts_in_s)}" if pred.starts_on else "-"
            rows.append((pred.job_id, "wait", "-", starts, _completes(pred), *(("-",) if steps else ())))
    print("\n".join(aligned(rows)))
    if any(p.after_spread is None and p.completion_s is not None for p in effect.jobs):
        print(f"±?: {ROUGH_GUESS}")
