"""Where each job's latest checkpoint is, and bringing it to the host a job restarts on.

Rank 0 writes the checkpoint, so the host of a run's rank 0 holds the latest one. The store
keeps that per job (setting ``checkpoint_hosts``), so a restarted controller still knows where
to copy from when the job next starts elsewhere (``checkpoint_copy``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import partial

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.checkpoint_copy import (
    CopyFailed,
    CopyRefused,
    copy_checkpoint,
    needs_copy,
    sees_same_files,
)
from heet_tui.control.checkpoint_dirs import HOSTS_SETTING
from heet_tui.control.launch import checkpoint_dir
from heet_tui.control.store import Store
from heet_tui.core.job import JobSpec

SETTING = HOSTS_SETTING
LEFT_BEHIND = "checkpoints_left_behind"  # job -> [host, step]: further checkpoints on hosts that were out
COPY_WAIT_S = 60.0  # a failed copy of a job's checkpoint is tried again this long (a host's grace period)


class CopyWaiting(RuntimeError):
    """The checkpoint could not be brought yet; the launch waits rather than start behind it."""


class CheckpointHosts:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store, self.clock = store, clock
        self._waiting: set[str] = set()  # jobs told they wait for the host with their checkpoint
        self._copy_failed: dict[str, float] = {}  # job -> when bringing its checkpoint first failed
        self.reclaiming: dict[str, tuple[str, int]] = {}  # job -> (host, step) its next launch resumes from
        self._said_unshared: set[tuple[str, str]] = set()  # (from, to) hosts found not to share a filesystem
        # hosts out past their grace period (lost), until back: a start elsewhere was planned, and shown,
        # as "starts without its checkpoint", so a failed copy from one is not waited on again
        self.given_up: set[str] = set()

    def out_of_reach(self, job_id: str, out: set[str], entries: Iterable[HostEntry]) -> str | None:
        """The host that alone holds the job's checkpoint, while it is out within its grace period:
        the job waits for it (and is told so once). Relaunched at once, the job copied nothing
        ("connection refused"), started from step 0 and lost 2,190 steps one second after the
        controller said the host had 60 s to come back."""
        src = self._hosts().get(job_id) if out else None  # no host out (most rounds): no store read
        entry = next((e for e in entries if e.name == src), None) if src in out else None
        if entry is None or entry.shared_fs:
            self._waiting.discard(job_id)
            return None
        if job_id not in self._waiting:
            self._waiting.add(job_id)
            why = (f"waits for host {src}, which holds its checkpoint, while the host has its grace period to "
                   "come back; after that it starts from what another host has")
            rec = self.store.job(job_id)
            if rec is not None:
                self.store.set_state(job_id, rec.job.state, self.clock(), why)
            self.store.add_event(self.clock(), "checkpoint", f"{job_id} {why}", job_id, src)
        return src

    def left_behind(self) -> dict[str, tuple[str, int]]:
        """Checkpoints further than where their job went on from, on hosts that were out of reach
        when it did (``reclaim.py`` takes them back when the host is)."""
        return {j: (h, int(s)) for j, (h, s) in json.loads(self.store.setting(LEFT_BEHIND) or "{}").items()}

    def note_left_behind(self, job_id: str, host: str, step: int) -> None:
        kept = self.left_behind()
        if job_id not in kept or kept[job_id][1] < step:
            kept[job_id] = (host, step)
            self.store.set_setting(LEFT_BEHIND, json.dumps(kept))

    def forget_left_behind(self, job_id: str) -> None:
        kept = self.left_behind()
        if kept.pop(job_id, None) is not None:
            self.store.set_setting(LEFT_BEHIND, json.dumps(kept))

    async def _shared_in_name_only(self, job_id: str, src: HostEntry, dst: HostEntry, directory: str,
                                   ssh_config, cluster_options, sftp_of=None) -> bool:
        """Hosts the hosts file says share a filesystem, where ``dst`` does not see the checkpoint
        ``src`` wrote: it is copied, and the hosts file's error is said (once per pair and run)."""
        if src.name == dst.name or (src.transport == "local" and dst.transport == "local"):
            return False
        if await sees_same_files(src, dst, directory, ssh_config, cluster_options, sftp_of) is not False:
            return False
        if (src.name, dst.name) not in self._said_unshared:
            self._said_unshared.add((src.name, dst.name))
            self.store.add_event(self.clock(), "warning", f"{job_id}: {dst.name} does not see the checkpoint "
                                 f"{src.name} wrote in {directory}, though the hosts file says they share a "
                                 "filesystem (shared_fs, true unless set): copied; set shared_fs = false for "
                                 "hosts that do not share one", job_id, dst.name)
        return True

    def away(self, records: Iterable, entries: Iterable[HostEntry], statuses: Iterable) -> dict[str, str]:
        """Jobs (of ``records``) whose checkpoint is on a host out of reach that no ready host reads
        it from (``needs_copy``: no shared filesystem, or another directory there), with that host
        and its state: what a start elsewhere would begin without (``Snapshot`` shows it)."""
        states = {s.name: s.state.value for s in statuses}
        by_name, hosts, records = {e.name: e for e in entries}, self._hosts(), list(records)
        # one that left the hosts file: after a controller restart nothing knew it held the checkpoint,
        # and the plan showed no warning before the job started from step 0
        out = {rec.job.id: f"{hosts[rec.job.id]} (not in the hosts file)" for rec in records
               if hosts.get(rec.job.id) and hosts[rec.job.id] not in by_name}
        if all(state == "ready" for state in states.values()):
            return out
        ready = [by_name[n] for n, state in states.items() if state == "ready" and n in by_name]
        for rec in records:
            src = by_name.get(hosts.get(rec.job.id, ""))
            if src is None or states.get(src.name, "ready") == "ready" or not ready:
                continue
            where = partial(checkpoint_dir, rec.job.id, rec.job.spec, store_id=self.store.store_id,
                            reported=rec.checkpoint)
            if all(needs_copy(src, dst, where(src), where(dst)) for dst in ready):
                out[rec.job.id] = f"{src.name} ({states[src.name]})"
        return out

    def _hosts(self) -> dict[str, str]:
        return json.loads(self.store.setting(SETTING) or "{}")

    def held_by(self, job_ids: Iterable[str]) -> set[str]:
        """The hosts that hold the latest checkpoint of any of these jobs."""
        hosts = self._hosts()
        return {hosts[j] for j in job_ids if j in hosts}

    def remember(self, job_id: str, rank0_host: str) -> None:
        hosts = self._hosts()
        hosts[job_id] = rank0_host
        self.store.set_setting(SETTING, json.dumps(hosts))

    async def bring(self, job_id: str, spec: JobSpec, entries: Mapping[str, HostEntry], dst: HostEntry,
                    reported: str | None = None, ssh_config=None, cluster_options=None, step: int = 0,
                    sftp_of=None) -> None:
        """Copy the job's checkpoint to ``dst`` when it is elsewhere and not on a shared filesystem
        (over the hosts' agent connections where ``sftp_of`` gives a session on one, else over new
        ones with the hosts file's ``ssh_config`` and the cluster layer's options)."""
        src_name = self._hosts().get(job_id)
        src = entries.get(src_name) if src_name else None
        if src is None:
            self._copy_failed.pop(job_id, None)
            if src_name and src_name != dst.name and (reported or step):  # said, not blamed on the script later
                self.store.add_event(self.clock(), "checkpoint", f"{job_id}: copying the checkpoint {src_name} -> "
                                     f"{dst.name}: failed: host {src_name} is no longer in the hosts file; resuming "
                                     f"from what {dst.name} has", job_id)
            return
        store_id = self.store.store_id
        src_dir = checkpoint_dir(job_id, spec, src, store_id, reported)
        dst_dir = checkpoint_dir(job_id, spec, dst, store_id, reported)
        if not needs_copy(src, dst, src_dir, dst_dir):
            if not await self._shared_in_name_only(job_id, src, dst, src_dir, ssh_config, cluster_options, sftp_of):
                # a launch that needed no copy ends the wait too: kept, the next loss of the host within
                # ten minutes counted from the old failure, and the job started behind at once
                self._copy_failed.pop(job_id, None)
                return
        began = self.clock()
        try:
            done = await copy_checkpoint(src, src_dir, dst, dst_dir, ssh_config, cluster_options, sftp_of)
            took = self.clock() - began
            base = src_dir.rstrip("/") + "/"
            if reported and reported.startswith(base):  # the path on its new host: it named the old host's
                self.store.update_progress(job_id, 0, 0.0, dst_dir.rstrip("/") + "/" + reported[len(base):])
            self.store.add_event(self.clock(), "checkpoint", f"{job_id}: copied {done.files} file(s), "
                                 f"{done.bytes / 1e6:.1f} MB in {took:.1f} s, {src.name} -> {dst.name}"
                                 + (f"; not copied: {', '.join(done.left_out[:10])} (subdirectories, and links "
                                    "to files outside the checkpoint directory, are not)" if done.left_out else ""),
                                 job_id)
        except CopyRefused as exc:  # waiting does not fix it: it read "may come back", then started from 0
            raise CopyWaiting(f"{exc}; {job_id} does not start on {dst.name} without it") from None
        except CopyFailed as exc:
            # The source dropped out between the stop and the copy (a move): relaunched at once, the
            # job trained 1,961 steps again, and the host was back 20 s later with them. It is tried
            # again for a while; gone for good, starting from what the new host has beats never starting.
            first = self._copy_failed.get(job_id, -1e18)
            if self.clock() - first > 10 * COPY_WAIT_S:  # a failure long ago is not this one's
                first = self._copy_failed[job_id] = self.clock()
            # waited already: an approved plan that said so failed twice over 60 s, trying the copy
            waited = src.name in self.given_up
            if reported is not None and not waited and self.clock() - first < COPY_WAIT_S:
                # "may come back with it" was said of a host that never left (the copy's login timed out)
                raise CopyWaiting(f"{exc}; a start within the next {COPY_WAIT_S - (self.clock() - first):.0f} s "
                                  f"tries the copy again (from {src.name} once it answers), and one after that "
                                  f"starts from what {dst.name} has") from None
            self.store.add_event(self.clock(), "checkpoint", f"{job_id}: {exc}; resuming from what {dst.name} has",
                                 job_id)
            if reported is not None:  # taken back if the host comes back (reclaim.py)
                self.note_left_behind(job_id, src.name, step)
        self._copy_failed.pop(job_id, None)
