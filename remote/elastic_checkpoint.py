"""Checkpoint files of ``heet_agent.elastic``: written atomically, owned by a launch generation.

A copy of a job left running on a host that was unreachable must never overwrite the checkpoint
of the launch that replaced it; every check of the owner and every write happen under one lock
file, so the fence cannot race a save. Python 3.8 syntax, like the rest of the agent bundle.
"""

import contextlib
import fcntl
import json
import os

from heet_agent.atomic_file import atomic_write, open_private
from heet_agent.checkpoint_dirs import makedirs_private

CHECKPOINT_NAME = "checkpoint.pt"
META_NAME = "checkpoint.json"
LOCK_NAME = ".checkpoint.lock"


def read_meta(directory):
    try:
        with open(os.path.join(directory, META_NAME)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def owned_by_newer(meta, generation):
    return isinstance(meta, dict) and int(meta.get("generation", -1)) > generation


@contextlib.contextmanager
def directory_lock(directory):
    """Serialises check-then-write between copies of the job: the fence must not race a save."""
    makedirs_private(directory)
    with open_private(os.path.join(directory, LOCK_NAME), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def save_owned(directory, generation, write_checkpoint, meta):
    """Write the checkpoint (``write_checkpoint(fh)``), then the small file ``meta`` beside it,
    unless a newer generation owns the directory: then nothing, and False."""
    with directory_lock(directory):
        if owned_by_newer(read_meta(directory), generation):
            return False
        atomic_write(os.path.join(directory, CHECKPOINT_NAME), write_checkpoint, sync=True)
        atomic_write(os.path.join(directory, META_NAME), lambda fh: fh.write(json.dumps(meta).encode()), sync=True)
    return True


def claim(directory, generation):
    """Record this generation as the directory's owner; False when a newer one owns it already."""
    with directory_lock(directory):
        meta = read_meta(directory)
        if owned_by_newer(meta, generation):
            return False
        info = {"step": 0, "samples": 0, "loss": None}
        if isinstance(meta, dict):
            info.update(meta)
        info["generation"] = generation
        atomic_write(os.path.join(directory, META_NAME), lambda fh: fh.write(json.dumps(info).encode()), sync=True)
    return True


def rank_zeros(data, world_size, device, is_main, say):
    """What rank 0 loaded (a checkpoint's dict, or None), on every rank.

    Hosts that share no filesystem (or keep checkpoints on local disks) gave the other ranks no
    checkpoint, or an older one: they trained from step 0 beside rank 0 until a collective went
    out of step (gloo: "Received data size doesn't match") or the ranks hung at the target, each
    in another collective. Ranks that loaded the same checkpoint keep theirs; otherwise rank 0
    sends its own, and says so (``say``) on rank 0.
    """
    import torch.distributed as dist

    mine = None if data is None else (int(data["step"]), int(data["samples"]), data.get("generation"))
    seen = [None] * world_size
    dist.all_gather_object(seen, mine)
    if all(s == seen[0] for s in seen):
        return data
    box = [data if is_main else None]
    dist.broadcast_object_list(box, src=0, device=device)
    if is_main:
        def show(s):
            return "none" if s is None else "step %d" % s[0]

        others = ", ".join("%d (%s)" % (r, show(s)) for r, s in enumerate(seen) if s != seen[0])
        say("rank(s) %s found another checkpoint than rank 0's: sent rank 0's (%s) to them" % (others, show(seen[0])))
    return box[0]
