"""``--hosts`` and ``--state`` are taken after every subcommand that runs on a cluster or a
state store, as well as before it.

Seen: ``heet-tui jobs --state st --hosts lab.toml`` (typed like ``submit`` and ``run`` before
it in the same script) failed with "unrecognized arguments: --hosts".
"""

from __future__ import annotations

import pytest

from heet_tui.cli.main import build_parser

COMMANDS = [
    ["submit", "job.toml"], ["jobs"], ["jobs", "a"], ["log", "a"], ["cancel", "a"], ["retry", "a"],
    ["run"], ["plan"], ["plan", "approve"], ["hosts", "list"], ["hosts", "check"], ["hosts", "drain", "h"],
    ["hosts", "remove", "h"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_both_locations_are_taken_after_the_subcommand(command: list[str]) -> None:
    args = build_parser().parse_args([*command, "--state", "st", "--hosts", "lab.toml"])
    assert args.state == "st"
    assert (getattr(args, "hosts_file", None) or args.hosts) == "lab.toml"


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_location_given_only_before_the_subcommand_is_kept(command: list[str]) -> None:
    args = build_parser().parse_args(["--state", "st", "--hosts", "lab.toml", *command])
    assert args.state == "st" and args.hosts == "lab.toml"


def test_after_overrides_before() -> None:
    args = build_parser().parse_args(["--state", "old", "jobs", "--state", "new"])
    assert args.state == "new"
