"""``--hosts FILE`` and ``--state DIR``, accepted before the subcommand and after it.

``heet-tui submit job.toml --state st`` is how people type it; argparse alone takes global
options only before the subcommand and answered "unrecognized arguments: --state st". The
subcommands that use them repeat them with a suppressed default, so a value given after the
subcommand overrides one given before, and one given only before is kept. Every subcommand
takes both (``add_location_options``), whether it reads them or not: ``heet-tui jobs --state st
--hosts lab.toml``, typed like every other command in a script, was refused for a ``--hosts``
it does not need.
"""

from __future__ import annotations

import argparse

HOSTS_HELP = ("hosts file (default: $HEET_HOSTS, else the file the state's controller last ran on, else "
              "~/.config/heet-tui/hosts.toml, then the bundled configs/local.toml)")
UNREAD_HOSTS_HELP = "not read by this command (accepted so that one set of options fits every command)"
STATE_HELP = "state directory (default: $XDG_STATE_HOME/heet-tui)"


def add_hosts_option(parser: argparse.ArgumentParser, *, after_command: bool = False, reads: bool = True) -> None:
    parser.add_argument("--hosts", metavar="FILE", help=HOSTS_HELP if reads else UNREAD_HOSTS_HELP,
                        **({"default": argparse.SUPPRESS} if after_command else {}))


def add_state_option(parser: argparse.ArgumentParser, *, after_command: bool = False) -> None:
    parser.add_argument("--state", metavar="DIR", help=STATE_HELP,
                        **({"default": argparse.SUPPRESS} if after_command else {}))


def add_location_options(parser: argparse.ArgumentParser, *, reads_hosts: bool = True) -> None:
    """Both options after a subcommand (module docstring); ``reads_hosts`` False says that --hosts
    changes nothing there (its help described a hosts file the command never opened)."""
    add_hosts_option(parser, after_command=True, reads=reads_hosts)
    add_state_option(parser, after_command=True)
