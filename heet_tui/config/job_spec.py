"""Job specs (``job.toml``): what to run, how big it may grow, and when it is done.

Schema::

    name = "resnet-small"                 # required; ASCII letters, digits, . _ -
    command = ["python3", "train.py"]     # argv list ... or script + args:
    script = "examples/training.py"
    args = ["--lr", "0.1"]
    workdir = "."                         # relative to this file
    env = { OMP_NUM_THREADS = "1" }
    model = "cifar10"                     # profile class: jobs with one model and batch_size share measurements
    batch_size = 128                      # global batch size
    target = { steps = 200 }              # exactly one of epochs, steps, samples
    min_gpus = 1                          # default 1
    max_gpus = 4                          # default min_gpus: without it the job is rigid, not elastic
    gpu_types = ["A100", "T4"]            # allowed; default all
    priority = 0
    checkpoint_dir = "/shared/ckpt/resnet-small"  # default: <host workdir>/checkpoints/<job id>.<state store id, 8 chars>
    dataset_samples = 50000               # samples per epoch, needed when target is in epochs
    stall_timeout = 1800                  # seconds without a progress line that mean "hung"; 0: never
    stop_grace = 30                       # seconds from the stop signal (SIGTERM) to SIGKILL: the last step
                                          # and checkpoint must fit in it

    [sweep]                               # optional: one job per combination (job_sweep.py)
    lr = [0.01, 0.1]                      # written where "{lr}" appears in the strings above

Training resumes from whatever checkpoint its directory holds, so ``heet-tui submit`` refuses a
``checkpoint_dir`` that a live job uses, or that holds a finished job's checkpoint already past
the new target; one left by a cancelled, failed or shorter job is resumed from, and says so.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from heet_tui.config.errors import ConfigError, parse_toml, read_config_file
from heet_tui.config.fields import SAFE_NAME, Fields
from heet_tui.config.job_sweep import TABLE as SWEEP
from heet_tui.config.job_sweep import substituted, sweep_points
from heet_tui.config.locate import LineIndex
from heet_tui.core.job import JobSpec, Target, TargetKind

JOB_KEYS = frozenset(
    {"name", "command", "script", "args", "workdir", "env", "model", "batch_size", "target", "min_gpus",
     "max_gpus", "gpu_types", "priority", "checkpoint_dir", "dataset_samples",
     "stall_timeout", "stop_grace"}
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_NAME = 96
MAX_STOP_GRACE_S = 3600  # a plan step waits out the grace: an hour is already a long wait for the others
# CUDA_DEVICE_ORDER too: CUDA_VISIBLE_DEVICES holds NVML's numbers, which are PCI bus order; a
# job's FASTEST_FIRST made them name other GPUs on a host of mixed cards
RESERVED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def load_job_spec(path: Path | str) -> JobSpec:
    path = Path(path)
    return parse_job_text(read_job_text(path), path)


def load_job_file(path: Path | str) -> list[JobSpec]:
    """The jobs of one file: one, or one per combination of its ``[sweep]`` (job_sweep.py)."""
    path = Path(path)
    return parse_job_file(read_job_text(path), path)


def read_job_text(path: Path) -> str:
    """A spec's text, refused where another user made the file (or a link on the way to it) or
    every user may write it: its command runs as you. One another user put in a shared sticky
    directory was queued by `submit '/tmp/sweep/*.toml'` and ran their command as the submitter.
    A group's shared project files stay usable: whoever may write them may write its scripts too."""
    import stat as stat_module

    from heet_tui.config.file_safety import planted_link, who

    text, st = read_config_file(path)
    why = planted_link(path) or (f"it is owned by {who(st.st_uid)}, not by you" if st.st_uid not in (os.getuid(), 0)
                                 else "every user can write it" if st.st_mode & stat_module.S_IWOTH else None)
    if why is not None:
        raise ConfigError(path, f"refused: {why}, and its command would run as you; copy it to a file of your own "
                                "(and read it), and use that")
    return text


def load_job_specs(paths: list[Path] | list[str]) -> tuple[list[JobSpec], list[Path], list[str]]:
    """Every spec of a sweep, the file each came from, and every problem with them (one message
    per bad file): all are read before any is queued, so one typo queues none and the user sees
    every typo at once."""
    specs: list[JobSpec] = []
    origins: list[Path] = []
    problems: list[str] = []
    names = Counter(Path(path).name for path in paths)
    for path in paths:
        try:
            found = load_job_file(path)
        except ConfigError as exc:
            problems.append(exc.naming(str(path)) if names[exc.path.name] > 1 else str(exc))
            continue
        specs += found
        origins += [Path(path)] * len(found)
    return specs, origins, problems


def spec_files(args: list[str]) -> list[Path]:
    """Command-line arguments as job files: a directory stands for its ``*.toml`` (as in the
    TUI, which took one while the command refused it), and so does a quoted glob the shell left
    alone (``'sweep/*.toml'`` was "file not found" here and accepted by the TUI's n)."""
    return [p for arg in args for p in (spec_paths(arg) if _names_several(arg) else [Path(arg)])]


def _names_several(arg: str) -> bool:
    expanded = os.path.expanduser(arg)
    return os.path.isdir(expanded) or (any(c in expanded for c in "*?[") and not os.path.exists(expanded))


def spec_paths(text: str) -> list[Path]:
    """The job files one typed answer names: a file, a directory (its ``*.toml``) or a glob
    (``~/sweep/lr*.toml``), sorted; a sweep is submitted from the TUI as from the shell."""
    expanded = os.path.expanduser(text.strip())
    if os.path.isdir(expanded):
        found = sorted(Path(expanded).glob("*.toml"))
    elif any(c in expanded for c in "*?["):
        found = sorted(Path(p) for p in glob.glob(expanded))
    else:
        return [Path(expanded)]
    if not found:
        folder = expanded if os.path.isdir(expanded) else os.path.dirname(expanded) or "."
        while not os.path.exists(folder) and os.path.dirname(folder) not in ("", folder):
            folder = os.path.dirname(folder)  # one above it may be what cannot be entered
        if os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK):  # it read as "none there"
            raise ConfigError(expanded, f"cannot read {folder}: permission denied (its job files cannot be listed)")
        raise ConfigError(expanded, f"no job files (*.toml) in {expanded}")
    return found


def spec_file(path: Path | str) -> str:
    """How a job remembers the file its spec came from: absolute, because the controller that
    reads it again (``u`` on the Jobs screen, a TUI attached to ``heet-tui run``) may run in
    another directory than the shell that submitted it."""
    return os.path.abspath(os.path.expanduser(str(path)))


def parse_job_text(text: str, path: Path | str) -> JobSpec:
    """One job's spec; a file with a ``[sweep]`` is refused here (``parse_job_file`` reads it)."""
    specs = parse_job_file(text, path)
    if len(specs) != 1:
        raise ConfigError(path, f"a sweep of {len(specs)} jobs where one job was expected")
    return specs[0]


def key_line(text: str, key: str) -> int | None:
    """The line of a spec's text where ``key`` is set (or its table opens), for messages."""
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"^\s*{re.escape(key)}\s*=", line) or line.strip() == f"[{key}]":
            return number
    return None


def parse_job_file(text: str, path: Path | str) -> list[JobSpec]:
    path = Path(path)
    data = parse_toml(text, path, "a job needs at least name, command, model, batch_size, target")
    index = LineIndex(text)

    def line_of(key: str) -> int | None:
        return key_line(text, key) or index.table_line(key) if key else None

    if SWEEP not in data:
        return [_spec_from(data, path, line_of)]
    points = sweep_points(data, path, line_of, text, index)
    specs = [_spec_from(substituted(data, point), path, line_of) for point in points]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(path, f'the sweep names two jobs "{twice}": put every sweep key in "name"', line_of("name"))
    dirs = [s.checkpoint_dir for s in specs]
    if dirs[0] and len(set(dirs)) != len(dirs):
        raise ConfigError(path, "jobs of the sweep would share a checkpoint_dir (each resumes from what it holds): "
                          'put the sweep keys in it, e.g. checkpoint_dir = "/ckpt/run-{lr}"', line_of("checkpoint_dir"))
    return specs


def _spec_from(data: dict, path: Path, line_of: Callable[[str], int | None]) -> JobSpec:
    name = data.get("name")
    subject = f'job "{name}"' if isinstance(name, str) and name else "job"
    f = Fields(path, data, subject, line_of)
    f.reject_unknown(JOB_KEYS)
    name = f.required_string("name", SAFE_NAME, "a valid job name (ASCII letters, digits, . _ -, starting with a letter or digit)")
    if len(name) > MAX_NAME:  # its processes' names on the hosts add a suffix, within the agent's 128
        raise f.error("name", f'key "name": {len(name)} characters; at most {MAX_NAME}')
    command = _command(f)
    workdir = f.string("workdir", "") or ""
    if workdir and not Path(workdir).expanduser().is_absolute():
        workdir = str((path.parent / workdir).resolve())
    min_gpus = f.integer("min_gpus", 1, low=1, high=MAX_GPUS) or 1
    max_gpus = f.integer("max_gpus", min_gpus, low=1, high=MAX_GPUS) or min_gpus
    if max_gpus < min_gpus:
        raise f.error("max_gpus", f'key "max_gpus": {max_gpus} is less than min_gpus ({min_gpus})')
    target = _target(f)
    dataset_samples = f.integer("dataset_samples", 0, low=0, high=MAX_COUNT) or 0
    if target.kind is TargetKind.EPOCHS and dataset_samples == 0:
        raise f.error("target", 'a target in epochs needs "dataset_samples" (samples per epoch)')
    return JobSpec(
        name=name,
        command=command,
        model=f.required_string("model", SAFE_NAME, "a valid model key"),
        batch_size=_required_int(f, "batch_size"),
        target=target,
        workdir=workdir,
        env=_env(f),
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        gpu_types=_gpu_types(f),
        priority=f.integer("priority", 0, low=-MAX_PRIORITY, high=MAX_PRIORITY) or 0,
        checkpoint_dir=_checkpoint_dir(f),
        dataset_samples=dataset_samples,
        stall_timeout_s=f.integer("stall_timeout", None, low=0, high=MAX_STALL_TIMEOUT_S),
        stop_grace_s=f.integer("stop_grace", None, low=1, high=MAX_STOP_GRACE_S),
    )


def _gpu_types(f: Fields) -> tuple[str, ...]:
    """An empty list reads as "no type" (the hosts file refuses gpus = []), and meant every type."""
    if f.table.get("gpu_types") == []:
        raise f.error("gpu_types", 'key "gpu_types": [] allows no GPU type; leave the key out to allow every type')
    return f.string_list("gpu_types", SAFE_NAME)


def _checkpoint_dir(f: Fields) -> str:
    """A folder on each host the job runs on: relative, it was kept as written, and meant another
    folder on each host (wherever the run started), so moves and retries did not find it."""
    value = f.string("checkpoint_dir", "") or ""
    if value and not (value.startswith(("/", "~/")) or value == "~"):  # "~ck" stayed relative on the host
        raise f.error("checkpoint_dir", f'key "checkpoint_dir": "{value}" is relative: give the folder on the '
                      "hosts as an absolute path (or ~/...), the same on every host the job may run on")
    if value and posixpath.normpath(value.removeprefix("~") or "/").strip("/") in ("", "."):
        raise f.error("checkpoint_dir", f'key "checkpoint_dir": "{value}" is a whole filesystem or home folder: '
                      "give the job a folder of its own in it")
    return value


def _required_int(f: Fields, key: str) -> int:
    if key not in f.table:
        raise f.error(None, f'missing required key "{key}"')
    value = f.integer(key, None, low=1, high=MAX_BATCH)
    assert value is not None
    return value


# beyond any real job, and within what the store's integers hold: 99999999999999999999 was accepted,
# shown as "wants 1-99999999999999999999" and planned around
MAX_GPUS = 65_536
MAX_BATCH = 2 ** 31
MAX_COUNT = 10 ** 15  # steps, samples or epochs of a target; samples per epoch (as progress reports)
MAX_PRIORITY = 1_000_000
MAX_STALL_TIMEOUT_S = 30 * 86400
MAX_COMMAND_BYTES = 256 * 1024  # the agent reads requests of up to 1 MiB; a launch carries this and more


def _command(f: Fields) -> tuple[str, ...]:
    argv = _argv(f)
    if (size := sum(len(a.encode()) for a in argv)) > MAX_COMMAND_BYTES:  # it was retried for ever, unlaunchable
        raise f.error("command" if "command" in f.table else "args",
                      f"the command is {size:,} bytes, more than the {MAX_COMMAND_BYTES:,} a launch carries: "
                      "pass long lists in a file")
    return argv


def _argv(f: Fields) -> tuple[str, ...]:
    has_command, has_script = "command" in f.table, "script" in f.table
    if has_command and has_script:
        raise f.error("script", 'give either "command" or "script" (+ "args"), not both')
    if not has_command and not has_script:
        raise f.error(None, 'missing required key "command" (an argv list) or "script"')
    if has_command:
        if "args" in f.table:
            raise f.error("args", '"args" goes with "script"; put arguments in the "command" list')
        argv = f.string_list("command")
        if not argv:
            raise f.error("command", 'key "command": must not be empty')
        _check_program(f, "command", argv[0])
        _refuse_launcher(f, argv)
        return argv
    script = f.required_string("script")
    _check_program(f, "script", script)
    return ("python3", script, *f.string_list("args"))


def _check_program(f: Fields, key: str, program: str) -> None:
    """What is run must be a name or path: "" and a name with a line break were accepted here and
    failed at every launch, the break splitting the agent's reply across the log."""
    if not program.strip() or any(c in program for c in "\n\r\t"):
        raise f.error(key, f'key "{key}": {program!r} is not a program name or path')


LAUNCHERS = frozenset({"torchrun", "deepspeed", "horovodrun", "mpirun", "mpiexec", "srun"})
LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch", "deepspeed.launcher.runner"})


def _refuse_launcher(f: Fields, argv: tuple[str, ...]) -> None:
    """A command that starts its own processes per GPU (torchrun, accelerate launch, mpirun, ...).

    heet-tui already starts one process per GPU with ``RANK``, ``WORLD_SIZE`` and ``MASTER_ADDR``
    set, so every one of them would start a launcher of its own: N launchers that each spawn
    their workers and rendezvous with each other, or train N separate copies. It can never work,
    so it is refused at submit time with the command to use instead.
    """
    argv = _unwrapped(argv)
    exe = Path(argv[0]).name if argv else ""
    if exe in LAUNCHERS or (exe == "accelerate" and argv[1:2] == ("launch",)):
        launcher = " ".join(argv[:2]) if exe == "accelerate" else exe
    elif exe.startswith("python") and "-m" in argv[:-1] and argv[argv.index("-m") + 1] in LAUNCHER_MODULES:
        launcher = f"python -m {argv[argv.index('-m') + 1]}"
    else:
        return
    script = next((i for i, a in enumerate(argv) if a.endswith(".py") and i > 0), None)
    instead = (", ".join(f'"{a}"' for a in ("python", *argv[script:])) if script is not None
               else '"python", "train.py", ...')
    raise f.error("command", f'key "command": {launcher} starts a process per GPU itself, and so does heet-tui '
                  "(one per GPU of the allocation, with RANK, WORLD_SIZE and MASTER_ADDR set, at whatever size "
                  f"the plan gives): run the script directly, command = [{instead}] (docs/TRAINING.md)")


WRAPPERS = {"env": 1, "nice": 1, "nohup": 1, "stdbuf": 1, "time": 1, "uv": 2, "poetry": 2, "pipenv": 2}


def _unwrapped(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command a wrapper runs: ``env X=1 torchrun ...``, ``uv run torchrun ...`` and
    ``bash -c "torchrun ..."`` got past the launcher check."""
    for _ in range(8):
        exe = Path(argv[0]).name if argv else ""
        if exe in ("bash", "sh", "zsh") and "-c" in argv[1:-1]:
            try:
                argv = tuple(shlex.split(argv[argv.index("-c") + 1]))
            except ValueError:
                return argv
        elif exe in WRAPPERS:
            rest = argv[WRAPPERS[exe]:]  # "uv run", "poetry run": the verb too
            while rest and (rest[0].startswith("-") or rest[0].isdigit() or (exe == "env" and "=" in rest[0])):
                rest = rest[1:]
            argv = rest
        else:
            return argv
    return argv


def _target(f: Fields) -> Target:
    raw = f.table_of("target")
    if raw is None:
        raise f.error(None, 'missing required key "target" (e.g. target = { steps = 1000 })')
    kinds = [k.value for k in TargetKind]
    t = Fields(f.path, raw, f"{f.subject}: target", lambda key: f.line_of("target"))
    t.reject_unknown(frozenset(kinds))
    if len(raw) != 1:
        raise t.error(None, f"give exactly one of {', '.join(kinds)}, got {len(raw)}")
    (kind, _), = raw.items()
    value = t.number(kind, None, positive=True)
    assert value is not None
    if value > MAX_COUNT:  # a step of 10**30 overflowed the store; 1e300 steps is a typo
        shown = f"{value:,.0f}" if value < 1e18 else f"{value:.3g}"
        raise t.error(kind, f'key "{kind}": {shown} {kind} is beyond any real job (at most {MAX_COUNT:,})')
    if kind != TargetKind.EPOCHS.value and not value.is_integer():  # 1e6 is fine, 2.5 steps is a typo
        raise t.error(kind, f'key "{kind}": expected a whole number of {kind}, got {value:g}')
    return Target(TargetKind(kind), value)


def _env(f: Fields) -> tuple[tuple[str, str], ...]:
    raw = f.table_of("env") or {}
    pairs = []
    for key, value in raw.items():
        if not ENV_NAME.match(key):
            raise f.error("env", f'key "env": {json.dumps(key)} is not a valid environment variable name')
        if key in RESERVED_ENV or key.startswith("HEET_"):
            raise f.error("env", f'key "env": "{key}" is set by heet-tui for each launch and cannot be overridden')
        if not isinstance(value, str):
            raise f.error("env", f'key "env": value of "{key}" must be a string (in quotes), '
                                 f"not {type(value).__name__} {json.dumps(value, default=str)}")
        if "\0" in value:
            raise f.error("env", f'key "env": value of "{key}" must be a string without NUL characters')
        pairs.append((key, value))
    return tuple(sorted(pairs))
