"""The ``heet-tui`` command line: the TUI by default, subcommands for scripting.

Subcommands are discovered: every module in ``heet_tui.cli.commands`` exposes
``register(subparsers)`` and every module in ``heet_tui.bench`` exposes
``register(bench_subparsers)``. Each parser sets ``func(args) -> int`` as its default.

Exit codes: 0 ok, 2 usage or input error, 1 other failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sqlite3
import sys
from pathlib import Path

from heet_tui import __version__
from heet_tui.cli.errors import CliError, UsageError
from heet_tui.cli.locations import add_hosts_option, add_state_option
from heet_tui.cli.printable import printable

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _discover(package: str) -> list:
    pkg = importlib.import_module(package)
    return [importlib.import_module(f"{package}.{m.name}") for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)]


class _Version(argparse.Action):
    """The version with the agent bundle's content hash: three builds 300 commits apart all said
    "heet-tui 0.1.0", and an admin could not tell which one served them (computed only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # type: ignore[override]
        from heet_tui.cluster.agent_bundle import agent_bundle

        print(f"heet-tui {__version__} (agent bundle {agent_bundle().digest[:8]})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heet-tui",
        description="Elastic training on heterogeneous GPU clusters. With no subcommand, opens the TUI.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and the agent's, and exit")
    add_hosts_option(parser)
    add_state_option(parser)
    parser.add_argument("--demo", action="store_true", help="run the app against the simulator, no hosts needed")
    parser.add_argument("--demo-cluster", metavar="FILE", help="with --demo: a simulated cluster of your own "
                        "(TOML, as configs/sim/sia-64gpu.toml) in place of the reference one")
    parser.add_argument("--demo-workload", metavar="FILE", help="with --demo: a workload CSV of your own "
                        "(heet-tui sim's format) in place of the demo's ten jobs")
    parser.add_argument("--read-only", action="store_true",
                        help="hide every action that changes anything; with no controller running on --state, "
                        "the one it starts only watches (it launches, profiles and applies nothing)")
    parser.set_defaults(func=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _discover("heet_tui.cli.commands"):
        if hasattr(module, "register"):
            module.register(sub)
    bench = sub.add_parser("bench", help="benchmarks: a table or summary line, JSON with --json")
    bench_sub = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for module in _discover("heet_tui.bench"):
        if hasattr(module, "register"):
            module.register(bench_sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()  # imports every command: a Ctrl-C in its second or two was a traceback
    except KeyboardInterrupt:
        return 130
    args = parser.parse_args(argv)
    if (args.demo_cluster or args.demo_workload) and not args.demo:
        parser.error("--demo-cluster and --demo-workload go with --demo")
    # --state "$UNSET": it used the real queue (and --hosts the remembered file; `hosts` keeps it as hosts_file)
    for option, dest in (("state", "state"), ("hosts", "hosts"), ("hosts", "hosts_file")):
        if getattr(args, dest, None) is not None and not str(getattr(args, dest)).strip():
            print(f"heet-tui: --{option} is empty (an unset variable?): give a "
                  f"{'directory' if option == 'state' else 'file'}, or leave --{option} out for the default one",
                  file=sys.stderr)
            return EXIT_USAGE
    func = args.func
    if func is None:
        from heet_tui.cli.tui import run_tui

        func = run_tui
    try:
        code = int(func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not in the interpreter's last flush (exit 120)
        return code
    except UsageError as exc:  # messages quote names from files others may write: escaped (printable.py)
        print(f"heet-tui: {printable(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except CliError as exc:
        print(f"heet-tui: {printable(str(exc))}", file=sys.stderr)
        return EXIT_FAILURE
    except RuntimeError as exc:
        from heet_tui.control.store import StoreError  # (imported here: most commands load it anyway, later)

        if not isinstance(exc, StoreError):
            raise
        print(f"heet-tui: {exc}", file=sys.stderr)  # the disk filled up under a submit or cancel: not a traceback
        return EXIT_FAILURE
    except sqlite3.DatabaseError as exc:
        from heet_tui.control.store import DB_NAME, default_state_dir
        from heet_tui.control.store_integrity import damaged, is_damage

        if not is_damage(exc):
            raise
        state = Path(args.state).expanduser() if getattr(args, "state", None) else default_state_dir()
        print(f"heet-tui: {damaged(state / DB_NAME, str(exc))}", file=sys.stderr)  # it was a traceback
        return EXIT_FAILURE
    except UnicodeEncodeError as exc:  # a file name that is not UTF-8 cannot go into the store
        print(f"heet-tui: a name or path that is not valid UTF-8: {exc.object[exc.start:exc.end]!r}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``heet-tui jobs --json | head``): its choice, not a failure. It was
        # 1 or 0 by whether the output fit the pipe, a random failure under `set -o pipefail`;
        # 0 as `sim --events /dev/stdout | head` ends. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
