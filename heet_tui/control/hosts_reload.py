"""Edits of the hosts file take effect while the controller runs.

The TUI's hosts screen, ``heet-tui hosts add|remove`` and a text editor all change the file;
the controller looks at its modification stamp every round and, when it changed, connects
the hosts that were added, drops those that were removed and reconnects those whose entry
changed. A host that runs jobs keeps its old entry until they have left it (drain it
first): dropping it would leave those jobs running unwatched. A file that does not validate
changes nothing, and the controller says why, with the line.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import COPY_HEADER, HostEntry, is_bundled, load_hosts, user_hosts_path
from heet_tui.control.drains import drain_reasons, drained_hosts, set_drained
from heet_tui.control.kept_hosts import remember_kept
from heet_tui.control.runtime import gpus_held

if TYPE_CHECKING:
    from heet_tui.control.controller import Controller


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _copied_from_bundled(path: Path) -> bool:
    """Only the copy an edit made is followed: a hosts file the user wrote by other means may
    name a real cluster, which a controller started on the bundled config must not take over."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().startswith(COPY_HEADER)
    except OSError:
        return False


def _same(a: HostEntry, b: HostEntry) -> bool:
    """Equal but for the line the entry starts on (adding a host above it moves it)."""
    return replace(a, line=None) == replace(b, line=None)


def _labels_only(a: HostEntry, b: HostEntry) -> bool:
    """Different in rack or tags alone: labels, which need no new connection. A changed rack
    reconnected the host, and on a host running a job waited for the job to end to apply."""
    return not _same(a, b) and replace(a, line=None, rack="", tags=()) == replace(b, line=None, rack="", tags=())


@dataclass(frozen=True, slots=True)
class HostsDiff:
    hosts: tuple[HostEntry, ...]  # what the controller uses from now on
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    waiting: tuple[str, ...]  # removed or changed in the file, kept as they were for their jobs
    relabelled: tuple[str, ...] = ()  # only rack or tags changed: taken as they are, no reconnect

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.waiting)


def diff_hosts(old: tuple[HostEntry, ...], new: tuple[HostEntry, ...], busy: set[str]) -> HostsDiff:
    before = {h.name: h for h in old}
    after = {h.name: h for h in new}
    relabelled = tuple(n for n in after if n in before and _labels_only(before[n], after[n]))
    waiting = tuple(n for n in before if n in busy and n not in relabelled
                    and (n not in after or not _same(before[n], after[n])))
    hosts = [before[h.name] if h.name in waiting else h for h in new]
    hosts += [before[n] for n in waiting if n not in after]
    return HostsDiff(
        tuple(hosts),
        added=tuple(n for n in after if n not in before),
        removed=tuple(n for n in before if n not in after and n not in waiting),
        changed=tuple(n for n in after if n in before and not _same(before[n], after[n]) and n not in waiting
                      and n not in relabelled),
        waiting=waiting,
        relabelled=relabelled,
    )


def renames(old: tuple[HostEntry, ...], new: tuple[HostEntry, ...], added: tuple[str, ...]) -> dict[str, str]:
    """old name -> new name, for an added entry equal to a gone one but for its name: the same
    machine renamed (in the TUI's hosts editor, in an editor)."""
    after = {h.name: h for h in new}
    gone = [h for h in old if h.name not in after]

    def machine(h: HostEntry) -> HostEntry:  # a local host's address is its name, and means nothing
        return replace(h, name="", line=None, address="" if h.transport == "local" else h.address)

    out: dict[str, str] = {}
    for name in added:
        twin = next((h for h in gone if h.name not in out and machine(h) == machine(after[name])), None)
        if twin is not None:
            out[twin.name] = name
    return out


def speed_changes(old: tuple[HostEntry, ...], new: tuple[HostEntry, ...], changed: tuple[str, ...]) -> dict[str, str]:
    """GPU type -> what changed, for emulated hosts whose speed changed and type did not. Every
    plan and prediction went on with the old speed's measurements (a T4 made 3x faster still
    read at its old rate), and since the type had an estimate it was never measured again."""
    before, after = {h.name: h for h in old}, {h.name: h for h in new}
    out: dict[str, str] = {}
    for name in changed:
        a, b = before[name].emulate, after[name].emulate
        if a is not None and b is not None and a.gpu_type == b.gpu_type and a.speed != b.speed:
            out[b.gpu_type] = f"{name}'s emulated speed went from {a.speed:g} to {b.speed:g}"
    return out


NOT_RELOADED = "hosts file not reloaded: "
LEAVING = "removed from the hosts file: its jobs move off first"
HOLDING = "removed from the hosts file: kept until the checkpoints it holds are copied to where their jobs start next"
SETTLE_S = 1.5  # a changed file is read once it has not changed for this long


class HostsReloader:
    def __init__(self, path: Path, kept: frozenset[str] = frozenset()) -> None:
        """``kept``: hosts the last controller kept for their jobs (kept_hosts.py), gone from the file."""
        self.path = path
        self._stamp = _stamp(path)
        self._pending = bool(kept)  # a change waits for jobs to leave a host
        self._changing: tuple[tuple[int, int] | None, float] | None = None  # a new stamp, and since when
        self.leaving: frozenset[str] = kept  # gone from the file, still running jobs: drained
        self.why: dict[str, str] = dict.fromkeys(kept, LEAVING)  # why each leaving host is kept
        self._said: str = ""
        # Running on the bundled config: its first edit makes the user's own copy and goes there
        # (editable_hosts_path), so follow it once it appears.
        self._follow = is_bundled(path) and not user_hosts_path().exists()

    def due(self) -> bool:
        if self._follow and _copied_from_bundled(user_hosts_path()):
            self.path, self._follow = user_hosts_path(), False
            return True
        if self._pending:
            return True
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        # read once it has stayed the same a moment: a file caught half-written (an editor writing
        # in place, a copy in two parts) was applied as it stood, its missing hosts removed and
        # their jobs stopped, and put back seconds later
        now = time.monotonic()
        if self._changing is None or self._changing[0] != stamp:
            self._changing = (stamp, now)
        return now - self._changing[1] >= SETTLE_S

    async def reload(self, ctl: Controller) -> list[str]:
        """Apply the file as it is now; returns what the user should be told (each thing once
        per version of the file: another edit with the same outcome was not said at all)."""
        if (stamp := _stamp(self.path)) != self._stamp and not self._said.startswith(NOT_RELOADED):
            self._said = ""  # a new version of the file: what it leads to is news again
        self._stamp = stamp
        try:
            new = load_hosts(self.path)
        except ConfigError as exc:
            self._pending = False
            return self._say(f"{NOT_RELOADED}{exc}; the controller keeps the {len(ctl.hosts.hosts)} hosts it had")
        # hosts this controller's jobs run on wait for them to leave; someone else's processes
        # there (another store's, a notebook) would keep an edited host waiting for good
        # and a host leaving the file keeps the only checkpoint of a live job until it is copied off: dropped
        # at once (its jobs stopped, with nowhere to go), the job later started elsewhere from step 0
        leaving = {h.name for h in ctl.hosts.hosts} - {h.name for h in new.hosts}
        waiting = (r.job.id for r in ctl.store.jobs(include_terminal=False) if r.job.id not in ctl.executor.runs)
        holding = leaving & ctl.executor.checkpoints.held_by(waiting)  # a running job's next is its rank 0's
        running = set(gpus_held(ctl.executor.all_runs()))
        diff = diff_hosts(ctl.hosts.hosts, new.hosts, running | holding)
        self._pending = bool(diff.waiting)
        self.leaving = frozenset(n for n in diff.waiting if n not in {h.name for h in new.hosts})
        self.why = {n: LEAVING if n in running else HOLDING for n in self.leaving}
        remember_kept(ctl.store, [h for h in diff.hosts if h.name in self.leaving])  # for the next controller too
        resped = speed_changes(ctl.hosts.hosts, diff.hosts, diff.changed)
        # a drain is the machine's: renamed, it went back into service with no word, and the old
        # name, drained still, drained whatever host was given that name later
        drained, reasons = drained_hosts(ctl.store), drain_reasons(ctl.store)
        moved = {old: name for old, name in renames(ctl.hosts.hosts, new.hosts, diff.added).items() if old in drained}
        for old, name in moved.items():
            set_drained(ctl.store, name, True, reasons.get(old, "drained by hand") + f" (as {old})")
            # kept a while under its old name for its jobs, it is drained as leaving: the record went on
            # after it was dropped, and drained a new host given that name later
            set_drained(ctl.store, old, False)
        health = ctl.executor.health
        # jobs that died at once on a host the edit changed (its python, say) try it again: the
        # mark that kept their model off it outlived the fix, said only by heet-tui status
        forgiven = [n for n in diff.changed if any(n in hosts for hosts in health.avoided.values())]
        for name in (*diff.removed, *diff.changed):
            await ctl.cluster.remove_host(name)
            ctl.was_ready.discard(name)  # reconnected on purpose: not "out", then "back"
            ctl.host_states.forget(name)
            if name in diff.changed:
                health.forget(name)
        hosts = replace(new, hosts=diff.hosts, ssh_config=ctl.hosts.ssh_config, path=self.path)
        ctl.hosts = ctl.executor.hosts = ctl.cluster.hosts_file = hosts
        entries = {h.name: h for h in diff.hosts}
        for name in (*diff.changed, *diff.added):
            await ctl.cluster.add_host(entries[name])
        for name in diff.relabelled:
            ctl.cluster.relabel(entries[name])
        parts = [f"{what} {', '.join(names)}" for what, names in
                 (("added", diff.added), ("removed", diff.removed), ("reconnecting", diff.changed),
                  ("new rack or tags for", diff.relabelled)) if names]
        if moved:
            parts.append(", ".join(f"{name} (was {old}) stays drained" for old, name in moved.items()))
        if forgiven:
            parts.append(f"jobs that died at once on {', '.join(forgiven)} may run there again (the edit may have "
                         "fixed why)")
        if self.leaving:
            its = "its" if len(self.leaving) == 1 else "their"
            parts.append(f"{', '.join(sorted(self.leaving))} drained and dropped once {its} jobs have moved "
                         "(the next plan moves them, or stops those no other host can hold)"
                         + (f"; {', '.join(sorted(holding))} also once the checkpoints "
                            f"{'it holds' if len(holding) == 1 else 'they hold'} are copied to where "
                            "their jobs start next" if holding else ""))
        edited = [n for n in diff.waiting if n not in self.leaving]
        if edited:
            parts.append(f"{', '.join(edited)} kept as before while jobs run there: the edit applies once they "
                         "have ended (drain it to move them off sooner)")
        for gpu_type, said in sorted(resped.items()):
            if gone := ctl.store.forget_observations(gpu_type):
                ctl.book.reload(ctl.store.observations())
                parts.append(f"{said}: its {gone} measurement(s) on {gpu_type} are forgotten, and jobs are measured "
                             "there afresh")
        if new.ssh_config != ctl.hosts.ssh_config:
            parts.append("the ssh_config setting applies when heet-tui restarts")
        if not parts and self._said.startswith(NOT_RELOADED):  # fixed: say so, or the error is the last word
            parts.append("it reads again, with no change to the hosts")
        return self._say(f"hosts file reloaded: {'; '.join(parts)}") if parts else []

    def _say(self, message: str) -> list[str]:
        if message == self._said:
            return []
        self._said = message
        return [message]
