"""Where each job's latest checkpoint is, and bringing it to the host a job restarts on.

Rank 0 writes the checkpoint, so the host of a run's rank 0 holds the latest one. The store
keeps that per job (setting ``checkpoint_hosts``), so a restarted controller still knows where
to copy from when the job next starts elsewhere (``checkpoint_copy``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from heet_tui.config.hosts_file import HostEntry
from heet_tui.control.checkpoint_copy import CopyFailed, copy_checkpoint, needs_copy
from heet_tui.control.checkpoint_dirs import HOSTS_SETTING
from heet_tui.control.launch import checkpoint_dir
from heet_tui.control.store import Store
from heet_tui.core.job import JobSpec

SETTING = HOSTS_SETTING


class CheckpointHosts:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store, self.clock = store, clock

    def _hosts(self) -> dict[str, str]:
        return json.loads(self.store.setting(SETTING) or "{}")

    def remember(self, job_id: str, rank0_host: str) -> None:
        hosts = self._hosts()
        hosts[job_id] = rank0_host
        self.store.set_setting(SETTING, json.dumps(hosts))

    async def bring(self, job_id: str, spec: JobSpec, entries: Mapping[str, HostEntry], dst: HostEntry,
                    reported: str | None = None, ssh_config=None, cluster_options=None) -> None:
        """Copy the job's checkpoint to ``dst`` when it is elsewhere and not on a shared filesystem
        (over SSH with the hosts file's ``ssh_config`` and the cluster layer's options)."""
        src_name = self._hosts().get(job_id)
        src = entries.get(src_name) if src_name else None
        if src is None:
            return
        store_id = self.store.store_id
        src_dir = checkpoint_dir(job_id, spec, src, store_id, reported)
        dst_dir = checkpoint_dir(job_id, spec, dst, store_id, reported)
        if not needs_copy(src, dst, src_dir, dst_dir):
            return
        began = self.clock()
        try:
            done = await copy_checkpoint(src, src_dir, dst, dst_dir, ssh_config, cluster_options)
            took = self.clock() - began
            self.store.add_event(self.clock(), "checkpoint", f"{job_id}: copied {done.files} file(s), "
                                 f"{done.bytes / 1e6:.1f} MB in {took:.1f} s, {src.name} -> {dst.name}", job_id)
        except CopyFailed as exc:
            # The old host may be gone for good; starting from what the new host has beats never starting.
            self.store.add_event(self.clock(), "checkpoint", f"{job_id}: {exc}; resuming from what {dst.name} has",
                                 job_id)
