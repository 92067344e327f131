"""``heet-tui status``: the cluster at a glance, from a shell (what ``sinfo`` and ``squeue -s``
give a Slurm user).

With ``heet-tui run`` in tmux on a server, what the hosts were doing took the TUI: ``hosts
check`` opens connections of its own and knows nothing of jobs or drains, and ``jobs`` nothing
of hosts. This asks the running controller for one snapshot over its attach socket (as ``plan``
does) and prints its hosts, GPUs in use and by whom, job counts, the pending plan and the latest
notices. With no controller running, it prints what the store and the hosts file know.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from heet_tui.cli.commands.jobs import open_store
from heet_tui.cli.errors import UsageError
from heet_tui.cli.locations import add_location_options
from heet_tui.cli.table import aligned, first_line, line_room
from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.attach_client import AttachedBackend, ControllerGone
from heet_tui.control.drains import drain_reasons, drained_hosts
from heet_tui.control.host_health import live_avoided
from heet_tui.control.hosts_choice import chosen_hosts_path
from heet_tui.control.kept_hosts import with_kept_hosts
from heet_tui.control.remembered import remembered_auto_approve, remembered_policy
from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store
from heet_tui.core.host import HostState
from heet_tui.core.job import JobState
from heet_tui.core.plan import count_changes
from heet_tui.core.snapshot import HostStatus, Snapshot

REPLY_TIMEOUT_S = 30.0
KEPT_NOTE = "removed from the file; the next controller keeps it, drained, for its jobs"
JOBS_SHOWN = 3  # job names per host row, then "+N"
STATE_ORDER = [s.value for s in JobState]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="hosts, GPUs in use, job counts and the pending plan at a glance")
    add_location_options(p)
    p.add_argument("--json", action="store_true", help="the same as one JSON object: controller, hosts, jobs, plan")
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    store = open_store(args)
    pid = controller_running(store.dir)
    silent = ""
    if pid is not None:
        try:
            report = _live_report(asyncio.run(_one_snapshot(store.dir)), pid, store)
        except (ControllerGone, TimeoutError) as exc:
            silent = str(exc) or "the controller did not answer in time"
    if pid is None or silent:
        # a hung controller (kill -STOP, a long round) still leaves the store to read: a cron
        # check got one line and exit 1, and no figures
        report = _stored_report(store, getattr(args, "hosts", None))
        if silent:
            report["controller"] = {"running": True, "answering": False, "pid": pid, "error": silent}
    if args.json:
        print(json.dumps(_every_key(report), indent=2))
    else:
        print("\n".join(_lines(report)))
    return 1 if silent else 0


async def _one_snapshot(state_dir: Path) -> Snapshot:
    backend = AttachedBackend(state_dir)
    await backend.start()
    try:
        return await asyncio.wait_for(anext(backend.snapshots()), REPLY_TIMEOUT_S)
    finally:
        await backend.stop()


def _host_row(h: HostStatus) -> dict[str, Any]:
    jobs = sorted({j for _, j in h.gpu_jobs})
    if h.drained:
        note = h.drained_why or "drained by hand"
    else:
        note = "; ".join(filter(None, [h.launch_blocked, *h.warnings])) if h.state is HostState.READY else h.message
    outside = {str(g.index): list(g.others) for g in h.gpus if g.others}
    if outside:  # someone's notebook on a GPU heet would otherwise use: plans keep off it
        note = "; ".join(filter(None, [note, "in use outside heet: " + "; ".join(
            f"gpu{i} {', '.join(who)}" for i, who in outside.items())]))
    return {"name": h.name, "state": h.state.value, "gpu_type": h.gpu_type or h.declared_type,
            "gpus": len(h.gpus), "busy": len(h.gpu_jobs), "jobs": jobs, "drained": h.drained, "note": note,
            "outside": outside}


def _live_report(snap: Snapshot, pid: int, store: Store) -> dict[str, Any]:
    counts = Counter(j.state.value for j in snap.jobs)
    for state, n in snap.hidden_ended:
        counts[state.value] += n
    plan = None
    if snap.plan is not None and snap.plan_id is not None:
        plan = {"id": snap.plan_id, "changes": count_changes(snap.plan.changes),
                # why auto-approve, on, leaves it to the user: said on the Plan screen only
                "held": snap.held_why if snap.auto_approve and snap.held_why else None}
    return {"controller": {"running": True, "pid": pid, "policy": snap.policy, "auto_approve": snap.auto_approve,
                           "read_only": snap.read_only, "log": str(store.dir / "controller.log"),
                           "store_error": snap.store_error or None},
            "hosts": _with_kept_off([_host_row(h) for h in snap.hosts], store), "jobs": _ordered(counts), "plan": plan,
            "notices": list(snap.notices[-2:]),
            "notices_at": list(snap.notices_at[-2:]) if len(snap.notices_at) == len(snap.notices) else []}


def _with_kept_off(rows: list[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    """Each host's note names the jobs' models that keep off it, where a run of theirs died at once
    (control/host_health.py): the host read "ready", with nothing to say why its GPUs stayed idle."""
    avoided = live_avoided(store)
    off = {h: sorted(f"model {m} at batch {b}" for (m, b), hosts in avoided.items() if h in hosts)
           for hosts in avoided.values() for h in hosts}
    for row in rows:
        if kinds := off.get(row["name"]):
            said = f"jobs of {', '.join(kinds)} keep off it (a run of theirs ended here, crashed or stopped hung, before its first report)"
            row["note"] = "; ".join(filter(None, [row["note"], said]))
    return rows


def _stored_report(store: Store, hosts_arg: str | None) -> dict[str, Any]:
    """No controller: hosts as the hosts file declares them, drains and jobs as the store has them."""
    try:
        # and the hosts gone from the file that the next controller keeps for their jobs (kept_hosts.py):
        # their jobs were in the counts, on no host
        hosts_file, kept = with_kept_hosts(load_hosts(chosen_hosts_path(hosts_arg, store.dir)[0]), store)
        hosts = hosts_file.hosts
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    drained, why = drained_hosts(store), drain_reasons(store)
    # jobs train on while no controller runs: the GPUs the last one gave them are theirs still, as far
    # as the store knows (the hosts of running jobs were listed with no jobs, as if idle)
    held: dict[str, list[tuple[int, str]]] = {}
    for job_id, (alloc, _) in store.current_allocations().items():
        for host, indices in alloc.hosts:
            held.setdefault(host, []).extend((i, job_id) for i in indices)
    # unknown with no controller: null to a script (it read the string "-"), "-" on the terminal
    rows = [{"name": h.name, "state": None, "gpu_type": h.emulate.gpu_type if h.emulate else (h.gpu_type or ""),
             "gpus": h.emulate.count if h.emulate else len(h.gpus or ()),
             "busy": len(held.get(h.name, ())), "jobs": sorted({j for _, j in held.get(h.name, ())}),
             "drained": h.name in drained or h.name in kept,
             "note": KEPT_NOTE if h.name in kept else why.get(h.name, "drained by hand") if h.name in drained else ""}
            for h in hosts]
    # what the next controller on this state starts with, as `plan show --json` says it (null read as unknown)
    remembered = {"policy": remembered_policy(store), "auto_approve": remembered_auto_approve(store), "read_only": False}
    return {"controller": {"running": False, **remembered}, "hosts": rows,
            "jobs": _ordered(Counter(store.state_counts())), "plan": None, "notices": []}


CONTROLLER_KEYS = {"running": False, "answering": None, "pid": None, "policy": None, "auto_approve": None,
                   "read_only": None, "log": None, "error": None, "store_error": None}


def _every_key(report: dict[str, Any]) -> dict[str, Any]:
    """The same keys whether a controller answered, hung or never ran (null where unknown): a script
    reading ``controller.policy`` or a host's ``outside`` met a KeyError once the controller stopped."""
    ctl = {**CONTROLLER_KEYS, **report["controller"]}
    if ctl["running"] and ctl["answering"] is None:
        ctl["answering"] = True
    hosts = [{"outside": {}, **h} for h in report["hosts"]]
    notices_at = report.get("notices_at") or [None] * len(report["notices"])
    return {**report, "controller": ctl, "hosts": hosts, "notices_at": notices_at}


def _ordered(counts: Counter[str]) -> dict[str, int]:
    """Every state, 0 included: a script reading ``jobs.failed`` from --json met a KeyError while none had."""
    return {s: counts[s] for s in STATE_ORDER}


def _lines(report: dict[str, Any]) -> list[str]:
    ctl, hosts = report["controller"], report["hosts"]
    if ctl.get("answering") is False:
        out = [f"controller  pid {ctl['pid']} does not answer ({ctl['error']}): hosts as the hosts file declares them, "
               "jobs as the store last has them", f"hosts       {len(hosts)}"]
    elif ctl["running"]:
        mode = ("watch-only (started by heet-tui --read-only: it launches, profiles and applies nothing)"
                if ctl["read_only"] else f"policy {ctl['policy']}, auto-approve {'on' if ctl['auto_approve'] else 'off'}")
        out = [f"controller  running (pid {ctl['pid']}), {mode}; log {ctl['log']}"]
        if ctl.get("store_error"):  # said as a notice at the bottom only, beside figures that read as live
            out.append(f"store       {ctl['store_error']}: the controller changes nothing until it can write; "
                       "jobs below are as last recorded")
        ready = sum(h["state"] == HostState.READY.value for h in hosts)
        busy, total = sum(h["busy"] for h in hosts if h["gpus"]), sum(h["gpus"] for h in hosts)
        # GPUs jobs still hold on a host out of reach (its grace period): not among the GPUs counted
        away = sum(h["busy"] for h in hosts if not h["gpus"])
        out.append(f"hosts       {ready} of {len(hosts)} ready, {busy} of {total} GPUs in use"
                   + (f", {away} more held on hosts out of reach" if away else ""))
    else:
        busy, total = sum(h["busy"] or 0 for h in hosts), sum(h["gpus"] for h in hosts)
        out = ["controller  not running (heet-tui run, or the TUI, starts one); hosts as the hosts file declares them",
               f"hosts       {len(hosts)}, {busy} of {total or '?'} GPUs held by jobs as the last controller left them"]
    if hosts:
        rows = [["HOST", "STATE", "GPUS", "IN USE", "JOBS", "NOTE"]]
        for h in hosts:
            jobs = ", ".join(h["jobs"][:JOBS_SHOWN]) + (f" +{len(h['jobs']) - JOBS_SHOWN}"
                                                         if len(h["jobs"]) > JOBS_SHOWN else "")
            gpus = f"{h['gpus']}x{h['gpu_type']}" if h["gpus"] else f"?x{h['gpu_type']}" if h["gpu_type"] else "-"
            in_use = "-" if h["busy"] is None else f"{h['busy']}/{h['gpus'] or '?'}"  # "2/0" on a host out of reach
            state = ("drained" if h["state"] is None else f"{h['state']}, drained") if h["drained"] else h["state"] or "-"
            rows.append([h["name"], state, gpus, in_use, jobs or "-", _first_line(h["note"])])
        out += ["  " + line for line in aligned(rows)]
    jobs = {s: n for s, n in report["jobs"].items() if n}
    as_left = "" if ctl["running"] else ", as the last controller left them"
    out.append("jobs        " + (", ".join(f"{n} {s}" for s, n in jobs.items()) + f"{as_left}  (heet-tui jobs)"
                                 if jobs else "none"))
    plan = report["plan"]
    if ctl["running"]:
        out.append(f"plan        #{plan['id']} pending ({plan['changes']}): heet-tui plan show"
                   + (f"; auto-approve leaves it to you: {plan['held']}" if plan.get("held") else "") if plan
                   else "plan        none pending: the current allocation stands")
    said_at = report.get("notices_at") or [None] * len(report["notices"])
    for notice, at in zip(report["notices"], said_at, strict=True):  # the latest, which may be old news: dated
        when = time.strftime("%H:%M:%S ", time.localtime(at)) if at else ""
        out.append(f"notice      {when}{_first_line(notice)}")
    return out


def _first_line(text: str) -> str:
    return first_line(text, line_room(20, 100)).removesuffix(" …")
