"""Which processes this agent did not start are computing on a GPU its jobs do not hold.

On a shared lab host, people also run notebooks and scripts on the GPUs by hand. heet used to
see such a GPU as free and launch a job onto it (out of memory, or both running at half speed).
The GPU's compute processes come from NVML (or nvidia-smi); a GPU that one of this agent's live
jobs holds is the job's, whatever runs there; on any other GPU, a process that is not in one of
this agent's job process groups (ended jobs' too: NVML may list a process for a moment after it
exits) is someone else's. Each is described by PID, user and command name.

A PID this agent cannot see is gone, or lives in another PID namespace: inside a container NVML
gives the host's PIDs, so another container's training run on a GPU read as free. Seen at
``HIDDEN_READINGS`` readings running, it counts as someone else's, named as unseen; at fewer it
may be a process that has just ended.
"""

import os

MAX_LISTED = 8  # processes described per GPU; a long tail is counted, not listed
HIDDEN_READINGS = 3  # readings in a row (a heartbeat's 2 s apart) before an unseen PID counts
HIDDEN = "(not visible here: another container?)"
_unseen = {}  # GPU (uuid, else index) -> {pid: readings in a row it was listed and not visible}


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
    """The HEET_JOB_ID a process runs under, when this user may read its environment."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"HEET_JOB_ID="):
                    return item[len(b"HEET_JOB_ID="):].decode("utf-8", "replace")[:96]
    except OSError:
        pass
    return None


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
    ``jobs`` (its job records) do not account for, on GPUs none of its live jobs hold."""
    held = set()
    groups = set()
    for job in jobs:
        if job.get("pgid"):
            groups.add(job["pgid"])
        if job.get("state") != "exited":
            held.update(job.get("gpus") or ())
    for gpu in gpus:
        pids = gpu.get("processes")
        if pids is None:
            continue
        if gpu.get("index") in held:
            gpu["others"] = []
            continue
        theirs, before, unseen = [], _unseen.get(_key(gpu), {}), {}
        for pid in pids:
            group = _group(pid)
            if group is None:  # gone, or not visible from here
                unseen[pid] = before.get(pid, 0) + 1
            elif group not in groups:
                theirs.append(pid)
        _unseen[_key(gpu)] = unseen
        described = [_describe(pid) for pid in theirs[:MAX_LISTED]]
        hidden = sorted(pid for pid, seen in unseen.items() if seen >= HIDDEN_READINGS)
        described += [{"pid": pid, "user": None, "name": HIDDEN} for pid in hidden[:MAX_LISTED - len(described)]]
        gpu["others"] = described
        if len(theirs) + len(hidden) > len(described):
            gpu["others_more"] = len(theirs) + len(hidden) - len(described)
    return gpus


def _key(gpu):
    return gpu.get("uuid") or gpu.get("index")
