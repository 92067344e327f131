"""Warnings said when jobs are submitted: a job spec that loads but will not run as meant.

Each is one line the user can act on at once, instead of a crash after the profiling runs or a
job that waits with nothing said.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

from heet_tui.config.hosts_file import HostsFile
from heet_tui.core.gpu import type_allowed
from heet_tui.core.job import JobSpec

MAX_SCRIPT_BYTES = 2_000_000  # read no further: a progress line's marker in a huge file is not worth the wait


def submit_hints(spec: JobSpec, path: Path | str, hosts: HostsFile | None) -> list[str]:
    found = (workdir_hint(spec, path), missing_files_hint(spec), gpu_types_hint(spec, hosts) if hosts else None,
             size_hint(spec, hosts) if hosts else None, progress_hint(spec, path))
    return [h for h in found if h]


def workdir_hint(spec: JobSpec, path: Path | str) -> str | None:
    """A warning for a command that names a file beside the job file while no ``workdir`` is set.

    Without ``workdir`` the command runs in the agent's own directory on each host, where a
    relative ``train.py`` is not found; every launch would then crash the same way, after the
    profiling runs. Said at submit time, the fix is one line.
    """
    if spec.workdir:
        return None
    here = Path(path).resolve().parent
    for arg in spec.command:
        if arg.startswith("-") or Path(arg).is_absolute():
            continue
        if (here / arg).is_file():
            return (f'"{arg}" is beside {Path(path).name}, but with no "workdir" the command runs in each host\'s '
                    f'agent directory, where it is not found; add workdir = "." to run it from {here}')
    script = _script(spec)
    if script is not None and not Path(script).expanduser().is_absolute():  # a misspelt name: failed 3 times
        return (f'"{script}" is not beside {Path(path).name}, and with no "workdir" the command runs in each '
                "host's agent directory: every launch fails unless it is there (give its folder as workdir)")
    return None


def missing_files_hint(spec: JobSpec) -> str | None:
    """A warning for a ``workdir`` or script that this machine does not have.

    Seen: a job whose script was misspelt was queued, profiled on three hosts, and failed with
    "can't open file" twelve seconds later. The hosts may see another filesystem than the
    machine that submits, so this warns and does not refuse.
    """
    missing = missing_here(spec)
    if missing is None:
        return None
    elsewhere = "have it (a shared filesystem)" if missing.startswith("workdir") else "have it there"
    return f"{missing}: every launch fails unless the hosts {elsewhere}"


def missing_here(spec: JobSpec) -> str | None:
    """The ``workdir``, or the script in it, that this machine does not have; None when both are here."""
    if not spec.workdir:
        return None  # the agent's own directory on each host: nothing here to look at
    base = Path(spec.workdir).expanduser()
    if not base.is_dir():
        return f"workdir {spec.workdir} does not exist on this machine"
    script = _script(spec)
    if script is not None and not (base / Path(script).expanduser()).is_file():
        return f'"{script}" is not in workdir {spec.workdir} on this machine'
    return None


def _script(spec: JobSpec) -> str | None:
    """The Python script the command runs, if it names one: after a python, its first argument
    that is not an option (a directory with a space in its name is a script's too; the
    ``"*.py"`` among its arguments is not); after anything else, an argument ending in .py that
    is not a ``bash -c`` string."""
    if PurePath(spec.command[0]).name.startswith("python"):
        args = iter(spec.command[1:])
        for arg in args:
            if arg in ("-m", "-c", "-"):
                return None
            if arg in ("-W", "-X", "-Q"):  # options that take the next argument
                next(args, None)
            elif not arg.startswith("-"):
                return arg if arg.endswith(".py") else None
        return None
    return next((a for a in spec.command[1:] if a.endswith(".py") and not a.startswith("-")
                 and not any(c.isspace() for c in a)), None)


def size_hint(spec: JobSpec, hosts: HostsFile) -> str | None:
    """A warning for a ``min_gpus`` more than the GPUs of any one of the job's types that the
    hosts file declares: a job runs on one type, so it would wait for good with nothing said (the
    total of all types was compared, and a job needing 3 on two 2-GPU types passed). Hosts whose
    GPUs NVML counts at connect leave it unknown, and nothing is said."""
    per_type: dict[str, int] = {}
    for host in hosts.hosts:
        count = host.emulate.count if host.emulate else len(host.gpus) if host.gpus is not None else None
        if count is None or host.declared_type is None:
            return None
        if not spec.gpu_types or spec.allows(host.declared_type):
            per_type[host.declared_type] = per_type.get(host.declared_type, 0) + count
    if not per_type or spec.min_gpus <= max(per_type.values()):  # none of its types: gpu_types_hint says so
        return None
    most = ", ".join(f"{n} {t}" for t, n in sorted(per_type.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"min_gpus = {spec.min_gpus} is more than the hosts in {hosts.path} declare of any one GPU type "
            f"({most}), and a job runs on one type: it waits until more are added")


def gpu_types_hint(spec: JobSpec, hosts: HostsFile) -> str | None:
    """A warning for ``gpu_types`` that no host of the hosts file has, said at submit time.

    A typo ("V100" on a cluster of A100s) left the job waiting with nothing said until a
    controller ran. A host that declares no type is read from NVML when it connects: with any
    such host nothing can be told.
    """
    declared = [h.declared_type for h in hosts.hosts]
    if not spec.gpu_types or not declared or None in declared:
        return None
    types = sorted({t for t in declared if t})
    # "A10O" beside "A100" was accepted without a word: the job just never ran on that type. Only
    # look-alike characters count as a typo: V100 is not a misspelt A100
    close = {t: [d for d in types if _looks(d) == _looks(t)]
             for t in spec.gpu_types if not any(type_allowed(d, (t,)) for d in types)}
    meant = "; ".join(f'"{t}": did you mean "{c[0]}"?' for t, c in close.items() if c)
    if any(spec.allows(t) for t in types):
        return f"gpu_types names types no host in {hosts.path} declares: {meant}" if meant else None
    return (f"no host in {hosts.path} declares a GPU type in gpu_types {list(spec.gpu_types)} (they declare "
            f"{', '.join(types)}): the job waits until a host of such a type is added" + (f"; {meant}" if meant else ""))


def _looks(name: str) -> str:
    """A GPU type name as it looks: O for 0, l and I for 1, no case, spaces, dashes or underscores."""
    return re.sub(r"[\s_-]", "", name.casefold()).translate(str.maketrans("oli", "011"))


def progress_hint(spec: JobSpec, path: Path | str) -> str | None:
    """A note for a Python script that neither imports ``heet_agent`` nor prints ``@heet-progress``.

    Such a job still runs, but its profiling runs measure nothing and it is planned on nominal
    throughput with unknown remaining work (docs/TRAINING.md); a user adapting their own script
    learnt that only from "unmeasured" in the job list. A module it imports may print the
    lines, so this is a note, not a refusal.
    """
    base = Path(spec.workdir) if spec.workdir else Path(path).resolve().parent
    for arg in spec.command[1:]:
        if not arg.endswith(".py"):
            continue
        script = Path(arg) if Path(arg).is_absolute() else base / arg
        try:
            with open(script, "rb") as fh:
                text = fh.read(MAX_SCRIPT_BYTES)
        except OSError:
            return None
        if b"heet_agent" in text or b"heet-progress" in text:
            return None
        return (f"{arg} neither uses heet_agent.elastic nor prints @heet-progress lines: unless something it "
                "imports prints them, heet-tui cannot measure its speed or progress (docs/TRAINING.md: the "
                "helper does it in a few lines)")
    return None
