"""``heet-tui run``: the controller without the TUI, for scripts, servers and tests.

Prints one line per event the controller records. Stops on SIGINT/SIGTERM (job processes
keep running on their hosts; the next ``heet-tui run`` re-adopts them) or, with
``--until-idle``, once no job is left to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time

from heet_tui.cli.arg_types import finite_float, fraction
from heet_tui.cli.commands.jobs import open_store, state_dir
from heet_tui.cli.commands.plan import predicted_jct
from heet_tui.cli.commands.stop import mark_headless
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.printable import printable
from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.hosts_choice import chosen_hosts_path
from heet_tui.control.log_file import LOG_NAME
from heet_tui.control.planning import make_named_policy
from heet_tui.control.store_events import job_named
from heet_tui.control.store_records import EventRecord
from heet_tui.core.plan import count_changes
from heet_tui.scheduling.registry import POLICY_NAMES

SETTLE_S = 3.0  # a proposed plan is announced once it has stood this long


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the controller headless (no TUI)")
    add_location_options(p)
    # Neither flag: as last set (here, or t in the TUI). A plain store_true wrote "off" at every
    # restart, and after an upgrade the queue waited for approvals again.
    p.add_argument("--auto-approve", action=argparse.BooleanOptionalAction, default=None,
                   help="apply without asking the plans that only start queued jobs, those whose predicted gain "
                        "is above --gain-threshold, and those that move jobs off drained hosts (default: as last "
                        "set, here or with t in the TUI)")
    p.add_argument("--until-idle", action="store_true", help="exit when every job is done, failed or cancelled: "
                   "status 1 when a job failed during this run, else 0")
    p.add_argument("--interval", type=finite_float, default=2.0, metavar="S", help="seconds between rounds (default 2)")
    p.add_argument("--policy", default=None, help=f"scheduling policy: {', '.join(POLICY_NAMES)} (default: the "
                   "last one used, else heet)")
    p.add_argument("--gain-threshold", type=fraction, default=None, metavar="G",
                   help="auto-approve applies a plan that restarts jobs only if it is predicted to gain this "
                        "fraction (default: as last set, else 0.05: 5%%)")
    p.add_argument("--host-grace", type=finite_float, default=None, metavar="S",
                   help="seconds a host may be out of reach before its jobs are counted lost and may start "
                        "elsewhere (default: as last set, else 60; longer for hosts over a slow or flaky link, "
                        "where a 90 s outage stopped healthy jobs)")
    p.add_argument("--no-profile", action="store_true",
                   help="no profiling runs: new jobs are planned on nominal throughput until their own "
                        "progress reports measure them")
    p.set_defaults(func=cmd_run)


def event_line(e: EventRecord) -> str:
    """An event's first line, naming its job when the message does not: two jobs failing in one
    second printed "failed  rank 0 on hostA ended with exit code 2" twice, with no job named. A
    failure's hint (its last line) is kept: "no module nosuchmod: install it on the host" was in
    `jobs NAME` only."""
    lines = e.message.splitlines() if e.message else [""]
    hint = next((line for line in reversed(lines[1:]) if line.startswith("hint: ")), "")
    return job_named(e.job_id, lines[0]) + (f" ({hint}; heet-tui jobs {e.job_id} has more)" if hint else "")


def cmd_run(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise UsageError(f"--interval must be > 0, got {args.interval:g}")
    if args.host_grace is not None and args.host_grace <= 0:
        raise UsageError(f"--host-grace must be > 0, got {args.host_grace:g}")
    try:
        path, why = chosen_hosts_path(args.hosts, state_dir(args))
        hosts = load_hosts(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(args, create=True)
    options = ControllerOptions(interval_s=args.interval, policy=args.policy or "heet",
                                auto_approve=args.auto_approve,
                                profile=not args.no_profile)
    try:
        if args.policy:  # an explicit choice replaces the one remembered in the store
            try:
                make_named_policy(args.policy)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            store.set_setting("policy", args.policy)
        if args.host_grace is not None:  # remembered, as the policy is: the TUI's controller uses it too
            store.set_setting("host_grace_s", repr(args.host_grace))
        if args.gain_threshold is not None:  # the same: a TUI opened later auto-approved at 5% again
            store.set_setting("gain_threshold", repr(args.gain_threshold))
        return asyncio.run(_run(hosts, store, options, args.until_idle, why))
    except (RuntimeError, ValueError) as exc:
        raise CliError(str(exc)) from None


async def _run(hosts, store, options: ControllerOptions, until_idle: bool, why_hosts: str = "") -> int:
    ended_before = {(r.job.id, r.job.state) for r in store.jobs() if r.job.state.terminal}
    failed_before = {job_id for job_id, state in ended_before if state.value == "failed"}
    controller = Controller(hosts, store, options)
    warnings = logging.StreamHandler(sys.stderr)  # the log file has everything; the terminal its warnings
    warnings.setLevel(logging.WARNING)
    # what store_health and round_errors log is also a notice, printed below
    warnings.addFilter(lambda record: record.name not in ("heet_tui.control.store_health",
                                                          "heet_tui.control.round_errors"))
    logging.getLogger("heet_tui").addHandler(warnings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    stopped_by: list[str] = []
    # SIGHUP: the SSH session it ran in dropped; unless it was started to outlive that (nohup, which
    # leaves SIGHUP ignored): a nohup'd controller stopped with the session it was meant to survive
    hup = () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
    for sig in (signal.SIGINT, signal.SIGTERM, *hup):
        loop.add_signal_handler(sig, lambda sig=sig: (stopped_by.append(sig.name), stop.set()))
    await controller.start()
    mark_headless(store)  # heet-tui stop asks: a TUI's controller closes a screen, this one does not
    # the store remembers auto-approve (t in a TUI turns it on): plans applied unasked came as a surprise
    approving = (f"auto-approve on: plans apply without asking, a restart for a predicted gain of "
                 f"{controller.opt.gain_threshold:.0%} or more (--no-auto-approve turns it off)"
                 if controller.auto_approve else "plans wait for approval (heet-tui plan approve)")
    why = f" ({why_hosts})" if why_hosts else ""
    _say(f"controller running: {len(hosts.hosts)} host(s) from {hosts.path}{why}, state in {store.dir} "
          f"(log: {store.dir / LOG_NAME}); {approving}")
    last_event = max((e.id for e in store.events(limit=1)), default=0)
    notices_shown = 0
    proposed: tuple[int | None, float, bool] = (None, 0.0, False)
    stuck: tuple[float | None, bool] = (None, False)
    try:
        while not stop.is_set():
            pending = controller.notices.since(notices_shown)  # taken first: their events are written by then
            notices_shown = controller.notices.total
            recent = store.events(limit=200)
            for e in recent:
                if e.id > last_event:
                    stamp = time.strftime("%H:%M:%S", time.localtime(e.at))
                    _say(f"{stamp} {e.kind:<10} {printable(event_line(e))}")
                    last_event = e.id
            # notices are what the TUI shows as toasts: a hosts file that did not reload, a failing
            # round, a store that takes no writes (then no event can be written to say so); one
            # that an event already said ("plan #3: 2 step(s) done") is not said twice
            said = {e.message for e in recent}
            for notice in pending:
                if notice not in said:
                    _say(f"{time.strftime('%H:%M:%S')} {'notice':<10} {printable(notice)}")
            proposed = _proposed(controller, proposed)
            if until_idle and controller.all_done():
                break
            if until_idle:
                stuck = _say_stuck(controller, stuck)
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass
    finally:
        await controller.stop(f"{stopped_by[0]} received" if stopped_by else
                              "every job ended (--until-idle)" if until_idle and controller.all_done() else "")
        logging.getLogger("heet_tui").removeHandler(warnings)
    everything = store.jobs()
    failed = [r.job.id for r in everything if r.job.state.value == "failed"]
    running = sum(r.job.state.value in ("running", "resizing") for r in everything)
    # this run's: "13 done" after one job ran counted the whole store's history
    jobs = [r for r in everything if (r.job.id, r.job.state) not in ended_before]
    _say(f"controller stopped: {sum(r.job.state.value == 'done' for r in jobs)} done, "
          f"{sum(r.job.state.value == 'failed' for r in jobs)} failed, "
          f"{sum(r.job.state.value == 'cancelled' for r in jobs)} cancelled in this run, "
          f"{sum(not r.job.state.terminal for r in jobs)} still active")
    if running:  # "still active" read as lost work
        _say(f"{running} job(s) train on, unwatched; the next heet-tui run (or TUI) on {store.dir} picks them up "
              "where they are")
    # a job that failed in an earlier run (retried since, or left) made every later run exit 1: a CI step that
    # reuses its state dir stayed red for good
    if stopped_by and stopped_by[0] == "SIGINT":
        return 130  # Ctrl-C, as the README's exit codes say (a script told an interrupted run from a clean end)
    if stopped_by and until_idle and not controller.all_done():
        # stopped before its jobs ended (a supervisor's TERM, a dropped session): 0 read as "every job ended"
        return 128 + getattr(signal, stopped_by[0])
    return 1 if until_idle and set(failed) - failed_before else 0


STUCK_SAY_S = 30.0  # --until-idle: jobs waiting with nothing running or proposed this long are said, once


def _say_stuck(controller: Controller, seen: tuple[float | None, bool]) -> tuple[float | None, bool]:
    """Under ``--until-idle``, say once why the jobs left wait when nothing runs and no plan is
    pending: a job no host could ever hold kept a nightly run waiting for good, without a word.
    ``seen``: since when it has been so (None: not so), and whether it was said."""
    since, said = seen
    if controller.executor.all_runs() or controller.pending_plan_id is not None or \
            (controller.applying is not None and not controller.applying.done()):
        return None, False
    now = time.monotonic()
    if since is None:
        return now, False
    if said or now - since < STUCK_SAY_S:
        return seen
    for rec in controller.store.jobs(include_terminal=False):
        _say(f"{time.strftime('%H:%M:%S')} {'waiting':<10} {rec.job.id}: {printable(rec.job.message or rec.job.state.value)}"
             " (--until-idle waits for it)")
    return since, True


def _proposed(controller: Controller, seen: tuple[int | None, float, bool]) -> tuple[int | None, float, bool]:
    """Say once that a plan waits for approval: headless, nothing else shows it (the TUI does).

    ``seen``: the pending plan, since when, and whether it was said. A plan is said once it has
    stood for ``SETTLE_S``: while profiling results arrive, plans replace each other every second.
    """
    plan_id, since, said = seen
    now = time.monotonic()
    if controller.pending_plan_id != plan_id:
        if said and plan_id is not None and (gone := controller.store.plan(plan_id)) is not None \
                and gone.status == "superseded":  # it was said to wait for approval, then went unsaid
            after = (f"plan #{controller.pending_plan_id} follows" if controller.pending_plan_id is not None
                     else "nothing is proposed now")
            _say(f"{time.strftime('%H:%M:%S')} {'plan':<10} plan #{plan_id} withdrawn: what it was made from "
                  f"changed (jobs, hosts or measurements); {after}")
        return controller.pending_plan_id, now, False
    if plan_id is None or said or now - since < SETTLE_S or (controller.auto_approve and not controller.held_why):
        return seen
    rec = controller.store.plan(plan_id)
    if rec is None or rec.status != "proposed":
        return seen
    jct = "; ".join(filter(None, (predicted_jct(rec.plan.effect), rec.plan.effect.delay_said())))
    held = f" and not auto-approved: {controller.held_why}" if controller.auto_approve else ""
    _say(f"{time.strftime('%H:%M:%S')} {'plan':<10} plan #{plan_id} proposed{held}: {count_changes(rec.plan.changes)}"
          f"{'; ' + jct if jct else ''}; heet-tui plan show|approve|reject --id {plan_id}, or the TUI")
    return plan_id, since, True


def _say(text: str) -> None:
    """One line to stdout, flushed; a stdout that is gone (the SSH session dropped, `| tee` ended
    by the same Ctrl-C) loses the line but not the controller's orderly stop: it exited 1 there
    with its summary and its "controller stopping" unwritten."""
    try:
        print(text, flush=True)
    except (BrokenPipeError, OSError):
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (kept for the rest of the run)
