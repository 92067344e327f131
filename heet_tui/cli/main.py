"""The ``heet-tui`` command line: the TUI by default, subcommands for scripting."""

from __future__ import annotations

import argparse
import sys

from heet_tui import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="heet-tui")
    parser.add_argument("--version", action="version", version=f"heet-tui {__version__}")
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
