"""Which checkpoint directory a new job may name.

Training resumes from whatever checkpoint its directory holds. So a directory that a live job
uses would be overwritten by two jobs at once, and one that a finished job left past the new
job's target would end the new job before its first step. A cancelled, failed or shorter job's
checkpoint is a legitimate place to resume from. (Jobs of another state store are caught by the
agents, which mark each directory with its store's id: ``remote/PROTOCOL.md``.)
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from heet_tui.config.errors import ConfigError
from heet_tui.config.job_spec import key_line
from heet_tui.core.job import JobSpec, JobState

# store setting: job -> the host its latest checkpoint is on (kept by control/checkpoint_hosts.py)
HOSTS_SETTING = "checkpoint_hosts"
FIX = "give this job its own checkpoint_dir, or leave the key out (each job then gets its own)"


class CheckpointUser(NamedTuple):
    """A job whose spec names the directory, as the store has it."""

    job_id: str
    state: JobState
    samples_done: float


class CheckpointDirInUse(ValueError):
    """A new job names a checkpoint directory that another job's checkpoints make unusable.

    ``index``: which of the specs submitted together was refused (``Store.add_jobs``).
    """

    def __init__(self, message: str, index: int = 0) -> None:
        super().__init__(message)
        self.index = index

    def located(self, path: Path, name: str) -> str:
        """Said as a spec's other problems are: file, line, job, key (it was the full path, no
        line, and another quoting)."""
        try:
            line = key_line(path.read_text(errors="replace"), "checkpoint_dir")
        except OSError:
            line = None
        return ConfigError(path, str(self), line, f'job "{name}": key "checkpoint_dir"').naming(str(path))


def same_dir(a: str, b: str) -> bool:
    """As written in the specs (paths live on the hosts), spelt the same way: "/tmp/y/../y/ck" and
    "//x" were other folders than "/tmp/y/ck" and "/x", and "/" the same as no folder at all."""
    return bool(a) and bool(b) and posixpath.normpath(a).lstrip("/") == posixpath.normpath(b).lstrip("/") \
        and a.startswith("/") == b.startswith("/")


def refuse_twin(spec: JobSpec, earlier: Sequence[JobSpec]) -> None:
    """Two specs of one submit naming one directory: said as "in use by job ck (queued)", a job
    that was not queued, nor ever would be."""
    twin = next((e for e in earlier if same_dir(spec.checkpoint_dir, e.checkpoint_dir)), None)
    if twin is not None:
        raise CheckpointDirInUse(f'"{spec.checkpoint_dir}" is the checkpoint_dir of job {twin.name} of this '
                                 f"submit too: the two would overwrite each other's checkpoints; {FIX}")


def refuse_shared(spec: JobSpec, users: Sequence[CheckpointUser]) -> None:
    """Raise :class:`CheckpointDirInUse` when ``spec`` may not use its directory (module doc)."""
    for user in users:
        if not user.state.terminal:
            raise CheckpointDirInUse(f'"{spec.checkpoint_dir}" is in use by job {user.job_id} '
                                     f"({user.state.value}): the two would overwrite each other's checkpoints; {FIX}")
        if user.samples_done >= spec.target_samples:
            raise CheckpointDirInUse(
                f'"{spec.checkpoint_dir}" holds the checkpoint of job {user.job_id} '
                f"({user.state.value}, {user.samples_done:g} samples), already past this job's target: it would "
                f"resume there and stop without training; {FIX}")


def resumed_from(users: Sequence[CheckpointUser]) -> CheckpointUser | None:
    """The job whose checkpoint a new job there resumes from: the one that got furthest."""
    return max(users, key=lambda u: u.samples_done) if users else None
