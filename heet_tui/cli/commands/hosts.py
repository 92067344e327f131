"""``heet-tui hosts list|check|add|remove|trust|drain|undrain``: the host list from the command line."""

from __future__ import annotations

import argparse
import fnmatch
import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import HOSTS_HELP, add_state_option
from heet_tui.cli.names import is_pattern, known_names
from heet_tui.cli.table import aligned
from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_edit import HostsDocument
from heet_tui.config.hosts_file import (
    HostEntry,
    HostsFile,
    editable_hosts_path,
    is_bundled,
    load_hosts,
    resolve_hosts_path,
)


def register(sub: argparse._SubParsersAction) -> None:
    hosts = sub.add_parser("hosts", help="list, check, add, remove, drain or trust hosts (no verb: list)")
    verbs = hosts.add_subparsers(dest="hosts_verb", metavar="VERB")
    hosts.set_defaults(func=cmd_list, json=False, hosts_file=None)  # a bare `hosts` was a usage error
    # ... and so were `hosts --json` and `hosts --hosts FILE` (list's options, without the verb)
    hosts.add_argument("--hosts", dest="hosts_file", metavar="FILE", default=argparse.SUPPRESS,
                       help=f"{HOSTS_HELP}; overrides the global --hosts")
    hosts.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="no verb: the hosts as JSON")

    def with_file(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--hosts", dest="hosts_file", metavar="FILE", help=f"{HOSTS_HELP}; overrides the global --hosts")
        add_state_option(p, after_command=True)
        return p

    p = with_file(verbs.add_parser("list", help="show the hosts file as a table"))
    p.add_argument("--json", action="store_true", help="the hosts as JSON")
    p.set_defaults(func=cmd_list)

    p = with_file(verbs.add_parser("check", help="connect to every host, deploy the agent, read the GPUs (exit 1 unless every host is ready with a usable GPU, and ssh(1) takes the SSH config and keys)"))
    p.add_argument("--json", action="store_true", help="a JSON array, one object per host: state, message, GPUs, agent, RTT")
    p.set_defaults(func=cmd_check)

    p = with_file(verbs.add_parser("add", help="add a host (edits the file in place, comments kept)"))
    p.add_argument("name")
    p.add_argument("--address", help="default: the name, which may be an ~/.ssh/config alias")
    p.add_argument("--port", type=int, help="SSH port (default: the file's [defaults], else ~/.ssh/config, else 22)")
    p.add_argument("--user", help="SSH user (default: the file's [defaults], else ~/.ssh/config, else yours)")
    p.add_argument("--gpu-type", help="the host's GPU type when NVML's name is not the one profiles use")
    p.add_argument("--rack", help="a label that groups hosts on the Cluster screen")
    p.add_argument("--transport", choices=["ssh", "local"], help="ssh (default), or local for this machine")
    p.add_argument("--emulate", metavar="TYPE:COUNT:SPEED", help="declared GPUs, e.g. T4:4:0.25")
    p.add_argument("--gpus", metavar="I,J,...", help="the GPU indices heet may use (default: all)")
    p.add_argument("--tags", metavar="A,B,...", help="free labels, for you (shown by hosts list and on the Hosts screen)")
    p.add_argument("--python", help="the host's interpreter for the agent (default: [defaults] or python3)")
    p.add_argument("--workdir", help="where the agent keeps its files there (default: [defaults] or ~/.heet)")
    p.add_argument("--jump", metavar="[USER@]HOST[:PORT]", help='a jump host; "" for none when [defaults] has one')
    p.add_argument("--no-shared-fs", dest="shared_fs", action="store_false", default=None,
                   help="checkpoints here are not on a filesystem the other hosts see: copy them over SSH")
    p.set_defaults(func=cmd_add)

    p = with_file(verbs.add_parser("remove", help="remove a host (edits the file in place)"))
    p.add_argument("name")
    p.set_defaults(func=cmd_remove)

    for verb, what in (("drain", "plans move its jobs off it and put nothing new there"),
                       ("undrain", "put a drained host back in service")):
        p = with_file(verbs.add_parser(verb, help=f"{what} (the state store's; a running controller follows)"))
        p.add_argument("names", nargs="+", metavar="NAME", help="host names or patterns ('rack2-*')")
        p.set_defaults(func=cmd_drain, drained=verb == "drain")

    p = with_file(verbs.add_parser("trust", help="approve a host's SSH key after checking its fingerprint"))
    p.add_argument("name")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation (a new key only; a changed "
                   "key needs --fingerprint)")
    p.add_argument("--fingerprint", metavar="SHA256:...", action="append",
                   help="trust the key only if it has this fingerprint (checked with the host's admin); also "
                   "replaces a changed key, without asking; give it once per host on the way when jump hosts are "
                   "not trusted yet")
    p.set_defaults(func=cmd_trust)


def _path(args: argparse.Namespace):
    from heet_tui.cli.commands.jobs import state_dir
    from heet_tui.control.hosts_choice import chosen_hosts_path

    try:
        return chosen_hosts_path(_explicit(args), state_dir(args))[0]
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _explicit(args: argparse.Namespace) -> str | None:
    """The hosts file given on the command line (the verb's --hosts, else the global one), if any."""
    return getattr(args, "hosts_file", None) or getattr(args, "hosts", None)


def _names_in(path) -> tuple[str, ...]:
    try:
        return load_hosts(path).names()
    except ConfigError:
        return ()


def _editable(path: Path) -> Path:
    try:
        editable, copied = editable_hosts_path(path)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise CliError(str(exc)) from None
    if copied:
        print(f"created {editable} from the bundled {path.name}; heet-tui uses it from now on")
    return editable


def _load(args: argparse.Namespace) -> HostsFile:
    try:
        return load_hosts(_path(args))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _entry_json(h: HostEntry) -> dict[str, Any]:
    return {
        "name": h.name, "address": h.address, "port": h.port, "user": h.user, "transport": h.transport,
        "gpu_type": h.gpu_type, "gpus": list(h.gpus) if h.gpus is not None else None, "tags": list(h.tags),
        "rack": h.rack, "jump": h.jump, "shared_fs": h.shared_fs,
        "emulate": None if h.emulate is None else
        {"gpu_type": h.emulate.gpu_type, "count": h.emulate.count, "speed": h.emulate.speed},
    }


def cmd_list(args: argparse.Namespace) -> int:
    hosts = _load(args)
    if args.json:
        print(json.dumps([_entry_json(h) for h in hosts.hosts], indent=2))
        return 0
    rows = [("NAME", "TRANSPORT", "ADDRESS", "USER", "RACK", "TAGS", "GPUS")]
    for h in hosts.hosts:
        gpus = f"emulated {h.emulate}" if h.emulate else (h.gpu_type or "from NVML")
        if h.gpus is not None:
            gpus += f" idx {','.join(map(str, h.gpus))}"
        address = "-" if h.transport == "local" else h.address + (f":{h.port}" if h.port else "")
        user = "-" if h.transport == "local" else h.user or "-"  # [defaults]' user is the ssh hosts'
        rows.append((h.name, h.transport, address, user, h.rack or "-", ",".join(h.tags) or "-", gpus))
    print(f"# {hosts.path}")
    print("\n".join(aligned(rows)))
    return 0


def _parse_emulate(value: str) -> dict[str, Any]:
    parts = value.split(":")
    if len(parts) != 3:
        raise UsageError(f'--emulate "{value}": expected TYPE:COUNT:SPEED, e.g. T4:4:0.25')
    gpu_type, count, speed = parts
    try:
        return {"gpu_type": gpu_type, "count": int(count), "speed": float(speed)}
    except ValueError:
        raise UsageError(f'--emulate "{value}": COUNT must be an integer and SPEED a number') from None


def cmd_add(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"name": args.name}
    if args.transport == "local" and (given := [f"--{k}" for k in ("address", "port", "user", "jump")
                                                if getattr(args, k) is not None]):
        # accepted, then never used: the host ran here whatever --address said
        raise UsageError(f"{', '.join(given)}: a local host runs on this machine, without SSH; "
                         "leave out --transport local for a host reached over SSH")
    for key in ("address", "port", "user", "gpu_type", "rack", "transport", "python", "workdir", "jump", "shared_fs"):
        if getattr(args, key) is not None:
            fields[key] = getattr(args, key)
    if args.tags is not None:
        fields["tags"] = [t.strip() for t in args.tags.split(",") if t.strip()]
    if args.gpus is not None:
        try:
            fields["gpus"] = [int(i) for i in args.gpus.split(",") if i.strip()]
        except ValueError:
            raise UsageError(f'--gpus "{args.gpus}": expected GPU indices, e.g. 0,1,3') from None
    if args.emulate:
        fields["emulate"] = _parse_emulate(args.emulate)
    path = _edited(_path(args), lambda doc: doc.add_host(fields))
    print(f'added host "{args.name}" to {path}')
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """No question asked (scripts remove hosts), but what becomes of the jobs running there is
    said, as the TUI's remove says it before asking."""
    try:
        entry = load_hosts(_path(args)).host(args.name)
    except (ConfigError, KeyError):
        entry = None  # the edit below says why it cannot be removed
    path = _edited(_path(args), lambda doc: doc.remove_host(args.name))
    print(f'removed host "{args.name}" from {path}')
    if said := _jobs_there_said(args, args.name, entry):
        print(said)
    return 0


def _jobs_there_said(args: argparse.Namespace, name: str, entry: HostEntry | None) -> str:
    """The jobs the state store has running on host ``name``, and what comes of them ("" for none,
    or where there is no store: none is created for asking). With no controller running, a host
    they need is recorded for the next one to keep (control/kept_hosts.py)."""
    from heet_tui.cli.commands.jobs import state_dir
    from heet_tui.control.host_removal import (
        checkpoints_on_host,
        checkpoints_said,
        jobs_on_host,
        removal_said,
    )
    from heet_tui.control.kept_hosts import kept_entries, remember_kept
    from heet_tui.control.remembered import remembered_auto_approve
    from heet_tui.control.snapshots import controller_running
    from heet_tui.control.store import DB_NAME, Store

    state = state_dir(args)
    if not (state / DB_NAME).is_file():
        return ""
    store = Store(state)
    running = controller_running(state) is not None
    jobs, checkpoints = jobs_on_host(store, name), checkpoints_on_host(store, name)
    if not running and entry is not None and (jobs or checkpoints):
        others = [e for e in kept_entries(store) if e.name != name]
        remember_kept(store, [*others, entry])
    said = [removal_said(jobs, running, remembered_auto_approve(store)), checkpoints_said(checkpoints, running)]
    return "\n".join(part for part in said if part)


def _edited(path: Path, change: Callable[[HostsDocument], None]) -> Path:
    """Apply ``change`` and save; the file it was saved to. The change is tried on ``path``
    first, in memory: a refused edit of the bundled file used to copy it to the user's hosts
    file anyway, which heet-tui then used from that moment on."""
    try:
        change(HostsDocument.load(path))
        doc = HostsDocument.load(_editable(path))
        change(doc)
        doc.save()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return doc.path


def cmd_check(args: argparse.Namespace) -> int:
    from heet_tui.cli.hosts_check import run_check

    hosts = _load(args)
    own = hosts.path.resolve() == resolve_hosts_path(None).resolve()
    return run_check(hosts, bool(args.json), "" if own else f" --hosts {shlex.quote(str(hosts.path))}",
                     _store_id(args))


def _store_id(args: argparse.Namespace) -> str:
    """The id of the state store --state names (or the default one), where it exists; none is
    created for asking."""
    from heet_tui.cli.commands.jobs import state_dir
    from heet_tui.control.store import DB_NAME, Store

    state = state_dir(args)
    return Store(state).store_id if (state / DB_NAME).is_file() else ""


def cmd_trust(args: argparse.Namespace) -> int:
    from heet_tui.cli.hosts_check import run_trust

    hosts = _load(args)
    if args.name not in hosts.names() and (theirs := _controller_hosts(args)) is not None:
        hosts = theirs  # the hint to run this came from a controller on another file (run --hosts F)
    if args.name not in hosts.names():
        raise UsageError(f'{hosts.path}: no host named "{args.name}" ('
                         f'{known_names(hosts.names(), args.name, "hosts")})')
    if not args.yes and not args.fingerprint and not sys.stdin.isatty():
        raise UsageError("refusing to trust a host key without a terminal to confirm on; pass --yes "
                         "(a new key) or --fingerprint SHA256:... (the key you checked)")
    own = hosts.path.resolve() == resolve_hosts_path(None).resolve()
    return run_trust(hosts, args.name, bool(args.yes), args.fingerprint,
                     "" if own else f" --hosts {shlex.quote(str(hosts.path))}")


def _controller_hosts(args: argparse.Namespace) -> HostsFile | None:
    """Without --hosts, the file the state's controller last ran on, where there is such a state
    (none is created for asking)."""
    from heet_tui.cli.commands.jobs import state_dir
    from heet_tui.control.store import DB_NAME, Store

    state = state_dir(args)
    if getattr(args, "hosts", None) or not (state / DB_NAME).is_file():
        return None
    path = Store(state).setting("hosts_path")
    try:
        return load_hosts(path) if path else None
    except ConfigError:
        return None


def cmd_drain(args: argparse.Namespace) -> int:
    """The drained set lives in the state store, as the TUI's d key writes it: a controller
    that drained a host as broken (control/host_health.py) is undone here when heet-tui runs
    headless. Several names and patterns at once: a rack of ten took ten calls."""
    from heet_tui.cli.commands.jobs import open_store, state_dir
    from heet_tui.control.drains import drain_by_hand, drained_hosts
    from heet_tui.control.store import DB_NAME

    # a drain before the first run is kept for it, in a store made for it once the names are checked
    store = open_store(args) if (state_dir(args) / DB_NAME).is_file() else None
    drained = drained_hosts(store) if store is not None else set()
    # --hosts given wins over the file the store's controller follows (it was ignored)
    stored = store.setting("hosts_path") if store is not None else None
    if stored and is_bundled(Path(stored)):  # copied on the first edit: the controller follows the copy
        stored = None
    path = _explicit(args) or stored or _path(args)
    if args.drained:
        try:
            names = list(dict.fromkeys([*load_hosts(path).names(), *sorted(drained)]))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        where, whose = f"{path}: ", "hosts"
    else:
        names, where, whose = sorted(drained), "", "drained hosts"
    chosen: dict[str, None] = {}
    for asked in args.names:
        pattern = is_pattern(asked)
        matched = [n for n in names if fnmatch.fnmatchcase(n, asked)] if pattern else [asked] * (asked in names)
        if not matched:
            if not args.drained and not pattern and len(args.names) == 1 and asked in _names_in(path):
                print(f"{asked} is not drained (drained: {', '.join(names) or 'none'})")
                return 0  # a host that is in service: nothing to do; a misspelt name is an error
            if not args.drained and (any(fnmatch.fnmatchcase(n, asked) for n in _names_in(path)) if pattern
                                     else asked in _names_in(path)):
                # hosts in service: nothing to do, as for one name (a nightly `undrain '*'` failed, exit 2)
                print(f"heet-tui: {asked}: {'none of its hosts is' if pattern else 'not'} drained", file=sys.stderr)
                continue
            raise UsageError(f'{where}no {whose[:-1]} named "{asked}" ({known_names(names, asked, whose)})'
                             + ("; nothing changed" if len(args.names) > 1 else ""))
        chosen.update(dict.fromkeys(matched))
    if store is None:  # a mistyped --state "drained" the host in a store no controller reads: said, not silent
        store = open_store(args, create=True)
        print(f"(a new state store in {store.dir}: no controller has run on it yet)", file=sys.stderr)
    for name in chosen:
        drain_by_hand(store, name, args.drained, time.time(), f"heet-tui hosts {'drain' if args.drained else 'undrain'}")
        print(f"{name} drained: its jobs move at the next plan, or stop where no other host can hold them" if args.drained else f"{name} back in service")
    return 0
