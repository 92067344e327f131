"""Which processes this agent did not start are computing on a GPU its jobs do not hold.

On a shared lab host, people also run notebooks and scripts on the GPUs by hand. heet used to
see such a GPU as free and launch a job onto it (out of memory, or both running at half speed).
The GPU's compute processes come from NVML (or nvidia-smi), an emulated GPU's from the job
wrappers' command lines; a GPU that one of this agent's live jobs holds is the job's, whatever
else runs there but another heet job; on any other GPU, a process that is not in one of
this agent's job process groups (ended jobs' too: NVML may list a process for a moment after it
exits) is someone else's. A PID this agent cannot see is left out: it is gone, or it lives in
another PID namespace (a container), where nothing tells whose it is. Each is described by
PID, user and command name.
"""

import os

MAX_LISTED = 8  # processes described per GPU; a long tail is counted, not listed


def _describe(pid):
    who, name = None, None
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("Name:"):
                    name = line.split(None, 1)[1].strip() if len(line.split(None, 1)) > 1 else None
                elif line.startswith("Uid:"):
                    who = _user(int(line.split()[1]))
                    break
    except (OSError, ValueError, IndexError):
        pass
    out = {"pid": pid, "user": who, "name": name}
    job = _heet_job(pid)
    if job:  # another state store's run (a second user, or a second --state): not "outside heet"
        out["heet_job"] = job
    return out


def _heet_job(pid):
    """The HEET_JOB_ID a process runs under, when this user may read its environment; else the
    job a job wrapper's command line names (another user's)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"HEET_JOB_ID="):
                    return item[len(b"HEET_JOB_ID="):].decode("utf-8", "replace")[:96]
    except OSError:
        pass
    wrapped = _wrapper(pid)
    return wrapped[1][:96] if wrapped else None


def _user(uid):
    try:
        import pwd  # only when there is someone to name

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _group(pid):
    try:
        return os.getpgid(pid)
    except OSError:  # gone, or not visible from here (another PID namespace)
        return None


def mark_others(gpus, jobs):
    """Set ``others`` on each GPU dict whose ``processes`` are known: the processes this agent's
    ``jobs`` (its job records) do not account for, on GPUs none of its live jobs hold; on a GPU
    one of them holds, only another heet job (another state store's, launched onto it in the
    same moment: both ran on it, and neither side ever said so)."""
    held = set()
    groups = set()
    own = set()
    for job in jobs:
        own.add(job.get("job_id"))
        if job.get("pgid"):
            groups.add(job["pgid"])
        if job.get("state") != "exited":
            held.update(job.get("gpus") or ())
    for gpu in gpus:
        pids = gpu.get("processes")
        if pids is None:
            continue
        theirs = []
        for pid in pids:
            group = _group(pid)
            if group is None or group in groups:  # None: gone, or not visible from here
                continue
            if gpu.get("index") not in held or _heet_job(pid) not in (None, *own):
                theirs.append(pid)
        gpu["others"] = [_describe(pid) for pid in theirs[:MAX_LISTED]]
        if len(theirs) > MAX_LISTED:
            gpu["others_more"] = len(theirs) - MAX_LISTED
    return gpus


EMULATED_PREFIX = "emulated-"  # an emulated GPU's uuid (inventory.emulated_gpus)
EMULATED_GPUS_ARG = "--emulated-gpus"  # in a job wrapper's command line (jobs.py)


def with_emulated_users(gpus, host):
    """``gpus`` with the processes computing on each emulated GPU. No driver lists them, so they
    are read from the job wrappers' command lines, which every user may read (an environment
    only its own user may): the wrapper of a job of host ``host`` names its exit file under
    ``hosts/<host>/exits`` and its emulated GPUs after ``--emulated-gpus``. Two users' controllers
    each put jobs on every emulated GPU of a shared host, and neither said a word. A machine
    another user's hosts file knows by another name is not matched."""
    if not host or not any(_unlisted_emulated(g) for g in gpus):
        return gpus
    users = _emulated_users(host)
    return [dict(g, processes=users.get(g.get("index"), [])) if _unlisted_emulated(g) else g for g in gpus]


def _unlisted_emulated(gpu):
    return str(gpu.get("uuid", "")).startswith(EMULATED_PREFIX) and gpu.get("processes") is None


def _emulated_users(host):
    found = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        wrapped = _wrapper(int(name))
        if wrapped is None or wrapped[0] != host:
            continue
        for part in wrapped[2].split(","):
            if part.strip().isdigit():
                found.setdefault(int(part), []).append(int(name))
    return found


def _wrapper(pid):
    """``(host, job id, emulated GPUs)`` of a job wrapper's command line, else None."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            args = fh.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return None
    if "--wrap-job" not in args:
        return None
    at = args.index("--wrap-job")
    rest = args[at + 1:args.index("--", at) if "--" in args[at:] else len(args)]
    if not rest or EMULATED_GPUS_ARG not in rest[1:-1]:
        return None
    parts = rest[0].replace("\\", "/").split("/")
    if len(parts) < 4 or parts[-2] != "exits" or parts[-4] != "hosts":
        return None
    job = parts[-1].rsplit("-g", 1)[0]
    return parts[-3], job, rest[rest.index(EMULATED_GPUS_ARG) + 1]
