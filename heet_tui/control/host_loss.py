"""A host that drops out keeps its jobs for a grace period before they count as lost.

Jobs outlive their agent (remote/PROTOCOL.md): an agent that crashed, or an SSH connection that
dropped for a moment, leaves the training running, and the host's next report re-adopts it.
Counting the runs lost at once (what this replaces) stopped healthy jobs at every blip: the
reconnected host's processes were fenced as stale, and the relaunch that followed raced the
fence and was counted as a crash. Within the grace period the host's jobs are left out of
planning (nothing is moved on a guess); after it, they are lost and planned afresh.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from heet_tui.cluster.errors import ClusterError
from heet_tui.config.hosts_file import resolve_hosts_path
from heet_tui.core.host import HostState
from heet_tui.core.job import HOST_OUT, JobState

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller
    from heet_tui.control.runtime import Run
    from heet_tui.control.store import Store
    from heet_tui.core.snapshot import HostStatus

OUT = HOST_OUT  # how the message of a job whose host is out begins
LOST_STATES = tuple(s for s in HostState if s not in (HostState.READY, HostState.CONNECTING))


# remote/takeover.py's refusals: a controller of a copy of this store, or of another store
# sharing the agent's workdir, serves the host; this store's jobs there run on under it
SERVED_ELSEWHERE = "managed by another heet-tui controller"
# a run's host the hosts file no longer has, removed while no controller ran: its run cannot be
# stopped, and the plan that moved the job started a second copy beside it
UNLISTED = "not in the hosts file: removed while no controller ran"
HELD_UNTIL = {SERVED_ELSEWHERE: "until that controller stops (it may train on there meanwhile)",
              UNLISTED: "until the host is back in the hosts file, where its run is looked for again and "
                        "carried on (heet-tui cancel gives the job up; a run there trains on until stopped)"}


def held_until(why: str) -> str | None:
    """How long a host out for ``why`` holds its jobs when that is for good (not the grace period)."""
    return next((until for marker, until in HELD_UNTIL.items() if marker in why), None)


async def try_hosts_near_their_deadline(ctl: Controller, now: float) -> None:
    for host in ctl.host_grace.to_try_now(now):
        with contextlib.suppress(ClusterError):  # gone from the hosts file meanwhile
            await ctl.cluster.reconnect(host)


def hold_unlisted_hosts(ctl: Controller, now: float) -> list[str]:
    """Runs found in the store on hosts the hosts file lacks are held there, said once each."""
    listed, runs, notes = {h.name for h in ctl.hosts.hosts}, ctl.executor.all_runs(), []
    for host in sorted({r.host for run in runs for r in run.ranks.values()} - listed):
        if ctl.host_grace.lost(host, UNLISTED, now):
            jobs = sorted({run.job_id for run in runs if run.on_host(host)})
            say_host_out(ctl.store, runs, host, UNLISTED, now, ctl.opt.host_loss_grace_s)
            notes.append(f"{', '.join(jobs)} ran on {host}, which is {UNLISTED}: put it back so that its run is "
                         "found again, or cancel the job")
    return notes


LAST_TRIES_S = 40.0  # the end of a host's grace period, when it is tried again every TRY_EVERY_S
TRY_EVERY_S = 5.0  # a connection under load took 4.4 s: a host back 10 s before its deadline makes it


@dataclass
class HostLossGrace:
    grace_s: float
    since: dict[str, tuple[float, str]] = field(default_factory=dict)  # host -> (when, why)
    tried: dict[str, float] = field(default_factory=dict)  # host -> when ``to_try_now`` last named it

    def lost(self, host: str, why: str, now: float) -> bool:
        """Note a host dropping out; True when this starts its grace period."""
        if host in self.since:
            return False
        self.since[host] = (now, why)
        return True

    def back(self, host: str) -> bool:
        """The host is ready again; True when it came back within its grace period."""
        self.tried.pop(host, None)
        return self.since.pop(host, None) is not None

    def expired(self, now: float) -> list[tuple[str, str]]:
        """Hosts out for longer than the grace period, with why; they are no longer held. A host
        refused because another controller serves it (of a copy of this store, or of another
        store in the same workdir) is held for good: its jobs run on there (counted lost, they
        were relaunched elsewhere, and the originals fenced once the host was back)."""
        out = [(host, why) for host, (at, why) in sorted(self.since.items())
               if now - at >= self.grace_s and held_until(why) is None]
        for host, _ in out:
            del self.since[host]
            self.tried.pop(host, None)
        return out

    def holding(self) -> set[str]:
        return set(self.since)

    def to_try_now(self, now: float) -> list[str]:
        """Hosts in the last ``LAST_TRIES_S`` of their grace, not tried by this for ``TRY_EVERY_S``:
        the link's backoff grows to 30 s, so a host back 10 s before its deadline was reconnected
        after it, and its healthy job was stopped as lost."""
        due = [h for h, (at, why) in sorted(self.since.items()) if held_until(why) is None
               and now - at >= self.grace_s - LAST_TRIES_S and now - self.tried.get(h, -1e18) >= TRY_EVERY_S]
        for host in due:
            self.tried[host] = now
        return due

    def note(self, hosts: set[str], now: float) -> str | None:
        """A running job's message while one of its ``hosts`` is out: the Jobs screen said
        "running" as if nothing were wrong, and only the Cluster screen showed the host out."""
        out = sorted(hosts & set(self.since))
        if not out:
            return None
        why = self.since[out[0]][1]
        if all(held_until(self.since[h][1]) for h in out):
            return f"its host {', '.join(out)} is out ({why}); it keeps its GPUs {held_until(why)}"
        left = max(0.0, self.grace_s - (now - min(self.since[h][0] for h in out)))
        return (f"its host {', '.join(out)} is out ({why}); it keeps its GPUs for {left:.0f} s "
                "more in case the host comes back with it still running")


def why_lost(why: str, latest: HostStatus | None) -> str:
    """What a host counted lost is said to be lost to: what took it out, unless its key is what
    keeps it out now. A host re-keyed after a cut was lost to "connection lost" in every job's
    event, though waiting would never bring it back."""
    if latest is not None and latest.state.awaits_trust:
        return f"{latest.state.value}: {latest.message}"
    return why


def say_host_out(store: Store, runs: Iterable[Run], host: str, why: str, now: float, grace_s: float) -> None:
    """The host's event, and each of its running jobs' message and event, until when it waits.
    The note above reached the TUI only: ``heet-tui jobs`` reads the store, and said "running on
    2xT4" with a frozen step count; and the event went to no job, so ``jobs NAME`` never named
    the host that stopped it."""
    until = time.strftime("%H:%M:%S", time.localtime(now + grace_s))
    held = held_until(why) or f"for {grace_s:g} s in case it comes back"
    store.add_event(now, "host", f"host {host} is out ({why}); its jobs keep their GPUs {held}", None, host)
    for run in runs:
        on_it = not run.profiling and any(r.host == host and not r.exited for r in run.ranks.values())
        rec = store.job(run.job_id) if on_it else None
        if rec is not None and rec.job.state is JobState.RUNNING:
            note = f"{OUT} {host} is out ({why}); it keeps its GPUs {held_until(why) or f'until {until} in case the host comes back'}"
            store.set_state(run.job_id, JobState.RUNNING, now, note)
            store.add_event(now, "host", f"{run.job_id}: {note}", run.job_id, host)


def say_host_back(store: Store, runs: Iterable[Run], host: str, now: float) -> None:
    for run in runs:
        rec = store.job(run.job_id) if any(r.host == host for r in run.ranks.values()) else None
        if rec is not None and rec.job.state is JobState.RUNNING and rec.job.message.startswith(f"{OUT} {host} "):
            store.set_state(run.job_id, JobState.RUNNING, now, f"running on {run.alloc.describe()}")


@dataclass
class HostStateLog:
    """Each host's trouble as an event, idle hosts' too.

    Only a host with running jobs got one (``say_host_out``), so an admin watching ``heet-tui
    run`` or controller.log saw nothing when an idle host's key changed, when every host refused
    a second controller, or when an idle host died, and then read "host gamma is back"."""

    last: dict[str, tuple[HostState, str]] = field(default_factory=dict)
    trust_option: str = ""  # " --hosts FILE" where `hosts trust` would not find the controller's file by itself

    def forget(self, host: str) -> None:
        """Reconnected on purpose (an edited entry): its next states are news, not "out" or "back"."""
        self.last.pop(host, None)

    def saw(self, host: str, status: HostStatus) -> str | None:
        """The event to record for this change, or None (connecting, the same again, a first ready)."""
        state = status.state
        if state is HostState.CONNECTING:
            return None
        # the same trouble with other figures is not news: "heard from it 3 s ago", then "5 s ago",
        # logged each retry (24 lines a minute while a copy's controller was refused)
        before, self.last[host] = self.last.get(host), (state, re.sub(r"\d+(\.\d+)?", "#", status.message))
        if before == self.last[host]:
            return None
        if state is HostState.READY:
            return f"host {host} is back" if before is not None and before[0] is not HostState.READY else None
        trust = (f"; check the key's fingerprint, then: heet-tui hosts trust {host}{self.trust_option}"
                 if state.awaits_trust else "")
        return f"host {host} is out ({state.value}: {status.message}){trust}"


def on_host_changed(ctl: Controller, host: str, status: HostStatus) -> None:
    now, state = ctl.clock(), status.state
    said = ctl.host_states.saw(host, status)
    if state is HostState.READY:  # a checkpoint a job left there is taken back once its jobs are reported
        ctl.was_ready.add(host)
        ctl.executor.checkpoints.given_up.discard(host)
        if ctl.host_grace.back(host):  # also after a drop to "connecting", which is said only for its jobs
            say_host_back(ctl.store, ctl.executor.all_runs(), host, now)
            said = f"host {host} is back"
    elif state in LOST_STATES or host in ctl.was_ready:
        ctl.was_ready.discard(host)
        why = f"{state.value}: {status.message}"
        if ctl.host_grace.lost(host, why, now):
            if ctl.executor.unconfirm(host):
                say_host_out(ctl.store, ctl.executor.all_runs(), host, why, now, ctl.opt.host_loss_grace_s)
                if not state.awaits_trust:
                    said = None  # say_host_out said it (what to do about a key is said below)
            elif said is None:  # a ready host dropping to "connecting": "is back" follows
                said = f"host {host} is out ({why})"
    if said is not None:
        ctl.store.add_event(now, "host", said, None, host)


def left_out_of_reach(hosts: Iterable[str], statuses: Iterable[HostStatus]) -> str:
    """What a cancel adds when the job's processes may run on where no stop reaches: they train
    on (holding those GPUs) until the host is back and fences them, and "cancelled" alone read
    as if they had stopped."""
    wanted = set(hosts)
    out = sorted(s.name for s in statuses if s.name in wanted and s.state is not HostState.READY)
    if not out:
        return ""
    return f"{UNREACHED} {', '.join(out)} (out of reach) is stopped when the host is back"


UNREACHED = "; its run on"  # left_out_of_reach's clause, dropped from the message once that run is stopped


def trust_hosts_option(path: Path) -> str:
    """" --hosts FILE" for the `heet-tui hosts trust NAME` a controller's messages suggest, where that
    command would not find the controller's hosts file by itself (it said 'no host named "hb"')."""
    if Path(path).resolve() == resolve_hosts_path(None).resolve():
        return ""
    return f" --hosts {shlex.quote(str(path))}"
