"""The host list (``hosts.toml``): schema, validation into dataclasses, and where to find it.

Schema::

    [defaults]            # every key optional; applies to each host that does not set it
    user = "alice"        port = 22          python = "python3"   # default: this interpreter for
                                                                # local hosts, python3 on remote ones
    workdir = "~/.heet"   ssh_config = "~/.ssh/config"   jump = "login.example.org"
    shared_fs = true

    [[hosts]]
    name = "a100-1"               # required, unique; letters, digits, . _ -
    address = "10.0.0.11"         # or an ~/.ssh/config alias; default: the name
    port = 22
    user = "alice"
    transport = "ssh"             # or "local" for this machine
    gpu_type = "A100"             # override what NVML reports
    gpus = [0, 1, 2, 3]           # indices heet may use; default all
    tags = ["nvlink"]
    rack = "r1"                   # network locality
    emulate = { gpu_type = "T4", count = 4, speed = 0.25 }   # declared GPUs, real training on CPU
    shared_fs = true              # sees the shared checkpoint filesystem
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from heet_tui.config.errors import ConfigError, parse_toml
from heet_tui.config.fields import (
    JUMP_SPEC,
    MAX_HOST_NAME,
    PYTHON,
    SAFE_ADDRESS,
    SAFE_NAME,
    SAFE_PYTHON,
    SAFE_USER,
    SAFE_WORKDIR,
    Fields,
)
from heet_tui.config.file_safety import read_private, write_private
from heet_tui.config.locate import LineIndex

TRANSPORTS = ("ssh", "local")
HOST_KEYS = frozenset(
    {"name", "address", "port", "user", "transport", "gpu_type", "gpus", "tags", "rack", "emulate",
     "python", "workdir", "jump", "shared_fs"}
)
WORKDIR = "a usable directory (no backslash, !, $, line break or leading -; ~/ is your home on the host)"
DEFAULT_KEYS = frozenset({"user", "port", "python", "workdir", "ssh_config", "jump", "shared_fs"})
EMULATE_KEYS = frozenset({"gpu_type", "count", "speed"})
MAX_EMULATED_GPUS = 256  # per host: more than any real machine holds
MAX_EMULATED_SPEED = 1000.0  # relative to a CPU core: a thousand times is beyond any GPU
MIN_EMULATED_SPEED = 0.001
TOP_KEYS = frozenset({"defaults", "hosts"})


@dataclass(frozen=True, slots=True)
class EmulateSpec:
    """GPUs a host declares instead of reading them: real training on CPU, time scaled by ``speed``."""

    gpu_type: str
    count: int
    speed: float

    def __str__(self) -> str:
        return f"{self.gpu_type}:{self.count}:{self.speed:g}"


@dataclass(frozen=True, slots=True)
class Defaults:
    user: str | None = None
    port: int | None = None  # None: the SSH config's Port, else 22 (an explicit 22 wins over the config)
    python: str | None = None
    workdir: str = "~/.heet"
    ssh_config: Path | None = None
    jump: str | None = None
    shared_fs: bool = True


@dataclass(frozen=True, slots=True)
class HostEntry:
    """One host with the defaults merged in; ``line`` is where its ``[[hosts]]`` table starts."""

    name: str
    address: str
    port: int | None = None  # None: the SSH config's Port, else 22
    user: str | None = None
    transport: str = "ssh"
    gpu_type: str | None = None
    gpus: tuple[int, ...] | None = None
    tags: tuple[str, ...] = ()
    rack: str = ""
    emulate: EmulateSpec | None = None
    python: str = "python3"
    workdir: str = "~/.heet"
    jump: str | None = None
    shared_fs: bool = True
    line: int | None = None

    @property
    def declared_type(self) -> str | None:
        """The GPU type the entry declares (``emulate`` or ``gpu_type``); None: NVML says, on connect."""
        return self.emulate.gpu_type if self.emulate else self.gpu_type


@dataclass(frozen=True, slots=True)
class HostsFile:
    path: Path
    hosts: tuple[HostEntry, ...]
    defaults: Defaults
    ssh_config: Path | None = None

    def host(self, name: str) -> HostEntry:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts)

    def speed_clash(self, name: str) -> str | None:
        """What to tell of an emulated host whose GPU type other hosts emulate at another speed:
        plans know GPUs by type, so one job was put across a host at 1.0 and one at 0.25 (running
        at the slow one's pace), and jobs were left on the slow host while the fast one sat idle."""
        me = next((h for h in self.hosts if h.name == name), None)
        if me is None or me.emulate is None:
            return None
        others = sorted({h.emulate.speed for h in self.hosts if h.emulate is not None and h.name != name
                         and h.emulate.gpu_type == me.emulate.gpu_type and h.emulate.speed != me.emulate.speed})
        if not others:
            return None
        said = (f"emulated {me.emulate.gpu_type} at speed {me.emulate.speed:g}, which other hosts emulate at "
                f"{', '.join(f'{s:g}' for s in others)}: plans know GPUs by type and cannot tell them apart")
        if me.emulate.speed > max(others):  # the fastest keep the name; "-slow" was offered to every host
            return f"{said}; the slower hosts are told to take a type of their own, this one may keep {me.emulate.gpu_type}"
        # named by speed, one type per speed: "-slow" given to every host made the clash again
        own = f"{me.emulate.gpu_type}-x{me.emulate.speed:g}"
        # jobs listing the old type in gpu_types then left the host alone, unsaid
        return (f"{said}; give this host a type of its own in its emulate table (e.g. emulate's gpu_type = "
                f'"{own}"; the host form\'s Emulate field: {own}:{me.emulate.count}:{me.emulate.speed:g}), and add '
                f"it to the gpu_types of jobs that list {me.emulate.gpu_type}")

    def emulation_clash(self, name: str, real_type: str) -> str | None:
        """What to tell of a host with real GPUs of a type other hosts emulate: plans know GPUs by
        type, and put one job across an emulated A100 (training on the CPU, gloo) and real ones
        (CUDA, NCCL), which cannot train together."""
        emulating = sorted(h.name for h in self.hosts if h.emulate is not None and h.name != name
                           and h.emulate.gpu_type.casefold() == real_type.casefold())
        if not real_type or not emulating:
            return None
        return (f"real {real_type} GPUs here, and {', '.join(emulating)} emulate {real_type}: one job may be placed "
                f"across both, and real and emulated ranks cannot train together; give the emulated GPUs a type of "
                f'their own (emulate = {{ gpu_type = "{real_type}-emu", ... }})')

    def emulated_names(self) -> frozenset[str]:
        """Hosts whose GPUs are declared and run on the CPU: speeds there follow the login node's load."""
        return frozenset(h.name for h in self.hosts if h.emulate is not None)


def load_hosts(path: Path | str) -> HostsFile:
    path = Path(path)
    return parse_hosts_text(read_private(path), path)


def parse_hosts_text(text: str, path: Path | str) -> HostsFile:
    """Validate a host list given as text (the editor re-checks its output with this before saving)."""
    path = Path(path)
    data = parse_toml(text, path, "add at least one [[hosts]] table")
    index = LineIndex(text)
    top = Fields(path, data, "", lambda key: None)
    top.reject_unknown(TOP_KEYS)
    defaults = _defaults(path, data.get("defaults", {}), index)
    raw_hosts = data.get("hosts", [])
    if not isinstance(raw_hosts, list) or not all(isinstance(h, dict) for h in raw_hosts):
        raise ConfigError(path, '"hosts" must be an array of tables: write each host as [[hosts]]')
    if not raw_hosts:
        raise ConfigError(path, "no hosts defined; add at least one [[hosts]] table")
    hosts: list[HostEntry] = []
    seen: dict[str, int | None] = {}
    for i, raw in enumerate(raw_hosts):
        entry = _host(path, raw, i, index, defaults)
        if entry.name in seen:
            first = f" (first defined at line {seen[entry.name]})" if seen[entry.name] else ""
            raise ConfigError(path, f'duplicate host name "{entry.name}"{first}', entry.line)
        seen[entry.name] = entry.line
        _refuse_same_gpus_twice(path, entry, hosts)
        hosts.append(entry)
    return HostsFile(path, tuple(hosts), defaults, defaults.ssh_config)


def _refuse_same_gpus_twice(path: Path, entry: HostEntry, before: list[HostEntry]) -> None:
    """Two entries for one machine's real GPUs (same address and port) must split them with
    ``gpus``: a copy-pasted entry, or one renamed by copying, counted the machine's GPUs twice,
    and plans put two jobs on each. Emulated GPUs are declared, not read: any may share a box."""
    if entry.emulate is not None or entry.transport != "ssh":
        return
    for other in before:
        if other.emulate is not None or other.transport != "ssh" or (other.address, other.port) != (
                entry.address, entry.port):
            continue
        if entry.gpus is None or other.gpus is None or set(entry.gpus) & set(other.gpus):
            both = "all" if entry.gpus is None or other.gpus is None else sorted(set(entry.gpus) & set(other.gpus))
            raise ConfigError(path, f'host "{entry.name}" is the same machine as host "{other.name}" (address '
                              f"{entry.address}{f', port {entry.port}' if entry.port else ''}), and both use its "
                              f"GPUs ({both}): remove one, or give each its own gpus = [...]", entry.line)


def _defaults(path: Path, raw: Any, index: LineIndex) -> Defaults:
    if not isinstance(raw, dict):
        raise ConfigError(path, '"defaults" must be a table: write it as [defaults]')
    f = Fields(path, raw, "[defaults]", lambda key: index.key_line("defaults", 0, key) if key else
               index.table_line("defaults"))
    f.reject_unknown(DEFAULT_KEYS)
    ssh_config = f.string("ssh_config")
    ssh_path = None
    if ssh_config:
        ssh_path = Path(os.path.expanduser(ssh_config))
        if not ssh_path.is_absolute():
            ssh_path = (path.parent / ssh_path).resolve()
    return Defaults(
        user=f.string("user", pattern=SAFE_USER, what="a valid user name"),
        port=f.integer("port", None, 1, 65535),
        python=f.string("python", pattern=SAFE_PYTHON, what=PYTHON),
        workdir=f.string("workdir", "~/.heet", pattern=SAFE_WORKDIR, what=WORKDIR) or "~/.heet",
        ssh_config=ssh_path,
        jump=f.string("jump", pattern=SAFE_ADDRESS, what="a valid jump host ([user@]host[:port])"),
        shared_fs=f.boolean("shared_fs", True),
    )


def _host(path: Path, raw: Mapping[str, Any], i: int, index: LineIndex, d: Defaults) -> HostEntry:
    line = index.table_line("hosts", i)
    name = raw.get("name")
    subject = f'host "{name}"' if isinstance(name, str) and name else f"host #{i + 1}"
    f = Fields(path, raw, subject, lambda key: index.key_line("hosts", i, key) if key else line)
    f.reject_unknown(HOST_KEYS)
    name = f.required_string("name", SAFE_NAME, "a valid host name (ASCII letters, digits, . _ -, starting with a letter or digit)")
    if len(name) > MAX_HOST_NAME:  # accepted here, it was refused by every agent at connect
        raise f.error("name", f'key "name": {len(name)} characters, more than the {MAX_HOST_NAME} a host name may have')
    transport = f.string("transport", "ssh") or "ssh"
    if transport not in TRANSPORTS:
        raise f.error("transport", f'key "transport": unknown transport "{transport}" (expected "ssh" or "local")')
    if transport == "local" and (given := [k for k in ("address", "port", "user", "jump") if raw.get(k) not in (None, "")]):
        # a host "spare" with address "spare-gpu" ran its jobs on the login node (the form and hosts add refuse it)
        raise f.error(given[0], f'key "{given[0]}": a local host runs on this machine, without SSH, and would not use '
                      f'{" or ".join(given)}; remove transport = "local" to reach it over SSH, or remove {" and ".join(given)}')
    address = f.string("address", name, SAFE_ADDRESS, "a valid address or ssh-config alias") or name
    if address.startswith("-"):
        raise f.error("address", f'key "address": "{address}" must not start with "-"')
    gpus, emulate = f.index_list("gpus"), _emulate(path, f, subject, index, i)
    _check_gpus(f, gpus, emulate)
    # jump = "" turns off a default jump for one host (e.g. a machine on the login node's LAN)
    jump = None if raw.get("jump") == "" else f.string("jump", d.jump, SAFE_ADDRESS, "a valid jump host")
    _check_jump(f, jump)
    return HostEntry(
        name=name,
        address=address,
        port=f.integer("port", d.port, 1, 65535),
        user=f.string("user", d.user, SAFE_USER, "a valid user name"),
        transport=transport,
        gpu_type=f.string("gpu_type", pattern=SAFE_NAME, what="a valid GPU type name"),
        gpus=gpus,
        tags=f.string_list("tags", SAFE_NAME),
        rack=f.string("rack", None, pattern=SAFE_NAME, what="a valid rack name (ASCII letters, digits, . _ -)") or "",
        emulate=emulate,
        python=f.string("python", d.python, SAFE_PYTHON, PYTHON) or _default_python(transport),
        workdir=f.string("workdir", d.workdir, pattern=SAFE_WORKDIR, what=WORKDIR) or d.workdir,
        jump=jump,
        shared_fs=f.boolean("shared_fs", d.shared_fs),
        line=line,
    )


def _check_gpus(f: Fields, gpus: tuple[int, ...] | None, emulate: EmulateSpec | None) -> None:
    """What only ``hosts check`` said (or nobody: ``gpus = []`` showed as "from NVML idx")."""
    if gpus is not None and not gpus:
        raise f.error("gpus", 'key "gpus": [] leaves heet no GPU on this host; leave the key out for all of them, '
                      "or drain the host")
    if gpus and emulate is not None and max(gpus) >= emulate.count:
        raise f.error("gpus", f'key "gpus": index {max(gpus)} is not among the {emulate.count} emulated GPUs '
                      f"(0-{emulate.count - 1})")


def _check_jump(f: Fields, jump: str | None) -> None:
    """A jump host's port and host are checked when the file is read, as ``port`` is; they were
    only when a connection was tried (or by ``hosts check``)."""
    if jump is None:
        return
    if jump.strip().lower() in ("none", "no", "direct", "false"):  # the form's word for it, written by hand
        raise f.error("jump", f'key "jump": "{jump}" would be a jump host of that name; write jump = "" to connect '
                      "directly (what the host form's \"none\" writes)")
    host = jump.rsplit("@", 1)[-1]
    port = re.search(r"(?<!:):(\d+)$", host) if not host.endswith("]") else None
    if port and not 1 <= int(port.group(1)) <= 65535:
        raise f.error("jump", f'key "jump": port {port.group(1)} is out of range (expected from 1 to 65535)')
    if not (host[: port.start()] if port else host).strip("[]:"):
        raise f.error("jump", f'key "jump": "{jump}" names no host (expected [user@]host[:port])')
    if not JUMP_SPEC.match(jump.strip()):
        raise f.error("jump", f'key "jump": "{jump}" is not of the form [user@]host[:port]')


def _emulate(path: Path, host: Fields, subject: str, index: LineIndex, i: int) -> EmulateSpec | None:
    raw = host.table_of("emulate")
    if raw is None:
        return None
    line = host.line_of("emulate")
    f = Fields(path, raw, f"{subject}: emulate", lambda key: line)
    f.reject_unknown(EMULATE_KEYS)
    gpu_type = f.required_string("gpu_type", SAFE_NAME, "a valid GPU type name")
    if "count" not in raw:
        raise f.error(None, 'missing required key "count"')
    # 0 brought up a host that can run nothing (drain one instead); 99,999 an agent whose GPU
    # list overran the controller's line limit, shown as a lost connection
    count = f.integer("count", None, low=1, high=MAX_EMULATED_GPUS)
    assert count is not None
    declared = host.string("gpu_type", pattern=SAFE_NAME, what="a valid GPU type name")
    if declared and declared != gpu_type:
        raise host.error("gpu_type", f'key "gpu_type": "{declared}" contradicts emulate\'s gpu_type "{gpu_type}" '
                         "(an emulated host's GPUs are of the type it emulates: give one)")
    speed = f.number("speed", 1.0, positive=True)
    assert speed is not None
    if not MIN_EMULATED_SPEED <= speed <= MAX_EMULATED_SPEED:  # 1e9 took no time; 1e-300 slept past time_t
        raise f.error("speed", f'key "speed": {speed:g} is out of range (expected from {MIN_EMULATED_SPEED:g} to '
                      f"{MAX_EMULATED_SPEED:g}: a speed relative to this machine's CPU)")
    return EmulateSpec(gpu_type, count, speed)


def _default_python(transport: str) -> str:
    """A local host runs the agent and its jobs with this very interpreter (it has torch when
    heet-tui was installed with it); a remote host with whatever ``python3`` is on its PATH."""
    return sys.executable if transport == "local" and sys.executable else "python3"


def bundled_config(name: str) -> Path:
    """A config shipped inside the package (``configs/`` in the repository)."""
    return Path(str(resources.files("heet_tui.bundled_configs").joinpath(name)))


COPY_HEADER = "# Your hosts file, first copied from heet-tui's bundled"


def user_hosts_path() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "heet-tui" / "hosts.toml"


def resolve_hosts_path(cli_value: str | None, last_used: str | None = None) -> Path:
    """``--hosts``, then ``$HEET_HOSTS``, then the file the state's controller last ran on (``last_used``,
    unless it is the bundled one; when it is gone, loading it says so), then ``~/.config/heet-tui/hosts.toml``, then the
    bundled local one. Without the state's own file, ``heet-tui run --state lab`` moved a lab's
    jobs to whatever the default file held, and ``hosts add`` edited a file its controller never read."""
    if cli_value:
        return Path(cli_value).expanduser()
    env = os.environ.get("HEET_HOSTS")
    if env:
        return Path(env).expanduser()
    if last_used and not is_bundled(Path(last_used)):
        return Path(last_used)  # even when gone: a file on NFS briefly away moved a lab's queue to this machine
    user = user_hosts_path()
    if user.exists():
        return user
    return bundled_config("local.toml")


def is_bundled(path: Path) -> bool:
    try:
        return path.resolve() == bundled_config("local.toml").resolve()
    except OSError:
        return False


def editable_hosts_path(path: Path) -> tuple[Path, bool]:
    """Where an edit of ``path`` goes, and whether the user's own file was just made for it.

    The bundled config lives in the installed package: an edit there is lost on the next
    upgrade (or refused, read-only). The first edit copies it, comments and all, to the
    user's hosts file, which every later run finds first. When that file exists already the
    edit is refused (``FileExistsError``): it belongs in that file, not in the one shown.
    Any other ``OSError`` names both files.
    """
    if not is_bundled(path):
        return path, False
    user = user_hosts_path()
    if user.exists():
        raise FileExistsError(f"{path} is heet-tui's bundled example and is not edited in place; your hosts "
                              f"file is {user} (heet-tui uses it when started without --hosts)")
    try:
        write_private(user, f"{COPY_HEADER} {path.name}.\n{path.read_text(encoding='utf-8')}")
    except OSError as exc:
        raise OSError(f"cannot copy {path} to {user}: {exc.strerror or exc}") from None
    return user, True
