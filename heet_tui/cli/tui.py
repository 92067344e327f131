"""Start the Textual app, when there is a terminal to draw it on."""

from __future__ import annotations

import argparse
import sys

from heet_tui.cli.errors import UsageError


def run_tui(args: argparse.Namespace) -> int:
    # Redirected (a file, a pipe, cron, `2> debug.log`), the app drew its screens into it until killed.
    if not (sys.stdin.isatty() and sys.stdout.isatty() and sys.stderr.isatty()):
        raise UsageError("the TUI needs a terminal, and stdin, stdout or stderr is not one; without it: heet-tui run "
                         "(the controller, headless), status, jobs, plan, log (heet-tui --help lists them)")
    from heet_tui.ui.app import run_app

    return run_app(args)
