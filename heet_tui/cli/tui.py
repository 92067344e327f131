"""Start the Textual app, when there is a terminal to draw it on."""

from __future__ import annotations

import argparse
import sys

from heet_tui.cli.errors import UsageError


def run_tui(args: argparse.Namespace) -> int:
    _check_demo_files(args)
    # Redirected (a file, a pipe, cron, `2> debug.log`), the app drew its screens into it until killed.
    if not (sys.stdin.isatty() and sys.stdout.isatty() and sys.stderr.isatty()):
        raise UsageError("the TUI needs a terminal, and stdin, stdout or stderr is not one; without it: heet-tui run "
                         "(the controller, headless), status, jobs, plan, log (heet-tui --help lists them)")
    from heet_tui.ui.app import run_app

    return run_app(args)


def _check_demo_files(args: argparse.Namespace) -> None:
    """A cluster or workload file of the user's own for the demo is read before any screen: with an
    error in it, the TUI opened on the hosts file instead, the reason in a passing toast."""
    cluster, workload = getattr(args, "demo_cluster", None), getattr(args, "demo_workload", None)
    if not (getattr(args, "demo", False) and (cluster or workload)):
        return
    from pathlib import Path

    from heet_tui.control.demo_inputs import check_demo_files

    try:
        check_demo_files(Path(cluster) if cluster else None, Path(workload) if workload else None)
    except ValueError as exc:  # SimInputError, and a model with no profile: file and line
        raise UsageError(f"--demo: {exc}") from None
