"""Advice for the crashes a script brought to heet-tui runs into, read from its log's last lines.

A failed job's message quoted its last log line, which says what broke but not why here: an
"invalid device ordinal" does not say that heet-tui numbers the GPUs a rank sees, nor does an
NCCL error on an emulated host say that its GPUs are the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from heet_tui.control.runtime import LAUNCH_REFUSED

CPU_BACKEND = ("emulated GPUs are this host's CPU: use the gloo backend and the CPU while HEET_EMULATED_SPEED "
               "is set (heet_agent.elastic does), docs/TRAINING.md")



def _missing_script(found: re.Match[str], workdir: str, ran_in: str) -> str:
    """The workdir advice only where the spec sets none: a spec with workdir = ".." and a misspelt
    "trian_plain.py" was told to set workdir = ".", which would not have found it either."""
    # a path of its own, not where the job ran (python shows a relative one joined to that): no workdir finds it
    elsewhere = bool(ran_in) and found[1].startswith("/") and not found[1].startswith(ran_in.rstrip("/") + "/")
    if workdir or elsewhere:
        where = f" (its workdir is {workdir})" if workdir else ""
        return (f"there is no {found[1]} where the job runs{where}: the file is not there "
                "(a typo in its name, or a file not copied to that host): correct the command (heet-tui update the "
                "job) or copy the file there, then retry it")
    return (f"there is no {found[1]} where the job runs: a script beside the job file needs workdir = \".\" in the "
            "spec (without a workdir the command runs in the agent's own directory on each host); then heet-tui "
            "update the job and retry it")


def _relative_file(found: re.Match[str], workdir: str, ran_in: str) -> str | None:
    """A relative path opened by a job without a workdir: it ran in the agent's directory, not
    beside its job file, and its FileNotFoundError was quoted with nothing to say so. Not for an
    absolute path, nor one starting with ~ (Python does not expand it: no workdir would find it),
    nor when the spec sets a workdir (the path is relative to the one it chose)."""
    path = found[1]
    if workdir or path.startswith(("/", "~")):
        return None
    where = f"the job ran in {ran_in}" if ran_in else "the job ran in the agent's own directory on its host"
    return (f"{path} is relative, and {where}: a spec without a workdir runs there, not beside its job file; "
            'set workdir (workdir = "." for beside the job file), then heet-tui update the job and retry it')


# advice for a match, the spec's workdir ("" when it sets none) and the directory the job ran in
# ("" when unknown); None: none to give
Advice = Callable[[re.Match[str], str, str], str | None]

# (pattern, advice, only on emulated hosts); a text advice may name the pattern's groups as {1}
HINTS: tuple[tuple[re.Pattern[str], str | Advice, bool], ...] = (
    (re.compile(r"DataLoader worker \(pid \d+\) is killed by signal: Terminated"),
     "the stop signal (SIGTERM, sent to the job's whole process group) killed its DataLoader workers before "
     "it saved: use heet_agent.elastic's run.data_loader, or give the DataLoader "
     "worker_init_fn=elastic.ignore_sigterm (docs/TRAINING.md)", False),
    (re.compile(r"invalid device ordinal", re.I),
     "it asked for a GPU it cannot see: CUDA_VISIBLE_DEVICES holds the job's GPUs on its host, the "
     "process's own at index LOCAL_RANK (not RANK)", False),
    (re.compile(r"Duplicate GPU detected", re.I),
     "its ranks on one host all used the first visible GPU: CUDA_VISIBLE_DEVICES holds the job's GPUs on the "
     "host, so call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before using CUDA", False),
    (re.compile(r"ProcessGroupNCCL|NCCL (?:error|is not available)|doesn't have NCCL built in", re.I),
     CPU_BACKEND, True),
    (re.compile(r"Found no NVIDIA driver|Torch not compiled with CUDA|No CUDA GPUs are available", re.I),
     CPU_BACKEND, True),
    (re.compile(r"ModuleNotFoundError: No module named '([^']+)'"),
     "the Python it ran under has no module {1}: install it on the host, or name an interpreter that has it "
     "as the host's python in the hosts file", False),
    (re.compile(r"can't open file '([^']+)': \[Errno 2\]"), _missing_script, False),
    (re.compile(r"FileNotFoundError: \[Errno 2\] No such file or directory: '([^']+)'"), _relative_file, False),
    (re.compile(r"No space left on device|Disk quota exceeded", re.I),
     "a disk it writes to (its checkpoint_dir, its data, or its log in the agent's workdir) is full or over "
     "quota: free space there; the job resumes from its last checkpoint", False),
    (re.compile(r"CUDA out of memory|OutOfMemoryError", re.I),
     "the local batch (batch_size / GPUs) does not fit one GPU: raise min_gpus, or leave this GPU type out "
     "of gpu_types", False),
)


# launch refusals a retry cannot change: the job's checkpoint_dir is another store's, or unsafe
FOR_GOOD = ("holds another heet-tui state store's checkpoints", "may be written by others", "not to you: give the job",
            "made, not you: give the job", "may be written by anyone and is not sticky")  # remote/checkpoint_dirs.py
# Not "Permission denied" or "Not a directory": those may be one host's (its filesystem), and the job
# moves off that host (host_health); on a lone host it is retried until it fails.


def refused_for_good(why: str) -> bool:
    """A retry of such a launch failed the same way twice more, and a plan had resized a running
    job to make room for each try."""
    return LAUNCH_REFUSED in why and any(reason in why for reason in FOR_GOOD)


def crash_hint(tail: Sequence[str], emulated: bool, workdir: str = "", ran_in: str = "") -> str | None:
    """The advice for the last matching line of ``tail``, or None. ``workdir``: the job spec's,
    "" when it sets none, and ``ran_in``: the directory the command ran in, "" when unknown (what
    a missing file's advice turns on)."""
    for line in reversed(tail):
        for pattern, advice, emulated_only in HINTS:
            if emulated_only and not emulated:
                continue
            found = pattern.search(line)
            if not found:
                continue
            if not isinstance(advice, str):
                said = advice(found, workdir, ran_in)
                if said is None:
                    continue
                return said
            return advice.replace("{1}", found.group(1)) if found.groups() else advice
    return None
