"""Checkpoint directories as the agent prepares them before a launch: marked with the state
store that owns them, or made for one run and removed when it ends."""

import os

from heet_agent.errors import JobError

OWNER_FILE = ".heet-owner"


def makedirs_private(path):
    """``os.makedirs`` with every directory it makes private, not only the last.

    The ones above the last took the umask: under umask 000 the agent's own ``checkpoints/`` was
    made 0777, which the planted-link check below then refused for every job's launch.
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        makedirs_private(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def resolve_checkpoint_dir(env, workdir):
    """Give the job its checkpoint dir as an absolute path, ``~`` expanded on this host.

    The controller writes it as the hosts file does (``~/.heet/checkpoints/...``), and only the
    ``heet_agent.elastic`` helper expanded it: a plain script's ``open(os.path.join(dir, ...))``
    failed, and its ``os.makedirs`` made a directory named ``~`` inside the job's workdir.
    """
    path = env.get("HEET_CHECKPOINT_DIR")
    if path:
        env["HEET_CHECKPOINT_DIR"] = os.path.normpath(os.path.join(workdir, os.path.expanduser(path)))


def claim_checkpoint_dir(env):
    """Mark the job's checkpoint directory (resolved by :func:`resolve_checkpoint_dir`) with the id of the state store that runs the job.

    Training resumes from whatever that directory holds. A job of another store (another user
    naming the same shared directory, or the same user after starting a fresh state directory)
    would resume from checkpoints that are not its own, or end at once as already done.
    """
    path, owner = env.get("HEET_CHECKPOINT_DIR"), env.get("HEET_CHECKPOINT_OWNER")
    if not path or not owner:
        return
    mark = os.path.join(path, OWNER_FILE)
    try:
        _refuse_planted(path)
        makedirs_private(path)
        _refuse_planted(path)
        _refuse_others(path)
        fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            with open(mark) as fh:
                found = fh.read().strip()
        except OSError as exc:
            raise JobError(f"cannot read {mark}: {exc}")
        if found != owner:
            raise JobError(f"checkpoint dir {path} holds another heet-tui state store's checkpoints (store "
                           f"{found}, this one is {owner}): give the job its own checkpoint_dir, or remove "
                           f"that directory if its checkpoints are not needed")
        return
    except OSError as exc:
        raise JobError(f"cannot prepare checkpoint dir {path}: {exc}")
    with os.fdopen(fd, "w") as fh:
        fh.write(owner + "\n")


def _refuse_planted(path):
    """A link on the way to the checkpoint dir that another user made, or a directory above it that
    anyone may write and that is not sticky: they could point the job's saves (its weights) into a
    directory of theirs while it runs (a planted ``shared/ck -> /my/dir`` was followed, then swapped
    for one of theirs, and the stop's checkpoint was written there). Root's links and /tmp pass."""
    me, prefix = os.getuid(), os.sep
    for part in path.strip(os.sep).split(os.sep):
        prefix = os.path.join(prefix, part)
        try:
            st = os.lstat(prefix)
        except FileNotFoundError:
            return  # made by the agent from here on
        if os.path.islink(prefix) and st.st_uid not in (me, 0):
            raise JobError(f"checkpoint dir {path}: {prefix} is a link that uid {st.st_uid} made, not you: "
                           "give the job a checkpoint_dir of its own")
        real = os.stat(prefix)
        if real.st_uid == me and not real.st_mode & 0o011:
            return  # nobody else may pass your directory: nothing below it can be theirs to swap
        if real.st_mode & 0o002 and not real.st_mode & 0o1000 and prefix != path:
            raise JobError(f"checkpoint dir {path}: {prefix} above it may be written by anyone and is not sticky: "
                           "give the job a checkpoint_dir in a directory of your own")


def _refuse_others(path):
    """A checkpoint dir someone else owns or may write: they could replace the checkpoints the job
    resumes from, or plant links its next save writes through (a shared /tmp/ckpt made 0777 by
    another user was taken as it was)."""
    st = os.stat(path)
    if st.st_uid != os.getuid():
        raise JobError(f"checkpoint dir {path} belongs to uid {st.st_uid}, not to you: give the job a "
                       "checkpoint_dir of its own")
    if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getgid()):
        raise JobError(f"checkpoint dir {path} may be written by others (mode {oct(st.st_mode & 0o777)}): "
                       f"chmod go-w {path}, or give the job another checkpoint_dir")


def make_scratch_dir(env):
    """A run's own checkpoint dir (``HEET_CHECKPOINT_SCRATCH=1``, profiling runs): the agent
    creates it and removes it when the run ends, so short runs leave no checkpoints behind.

    It must not exist yet: the agent only ever removes a directory it made for the run.
    Returns its path, or None for a job with an ordinary checkpoint dir.
    """
    path = env.get("HEET_CHECKPOINT_DIR")
    if env.get("HEET_CHECKPOINT_SCRATCH") != "1" or not path:
        return None
    try:
        _refuse_planted(path)  # before anything is made through another user's link
        makedirs_private(os.path.dirname(path))
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise JobError(f"scratch checkpoint dir {path} exists already; it is not this run's to use or remove")
    except OSError as exc:
        raise JobError(f"cannot create scratch checkpoint dir {path}: {exc}")
    return path


def remove_scratch_dir(path):
    if path:
        import shutil

        shutil.rmtree(path, ignore_errors=True)
