"""Start the Textual app (placeholder until the UI lands)."""

from __future__ import annotations

import argparse


def run_tui(args: argparse.Namespace) -> int:
    from heet_tui.ui.app import run_app

    return run_app(args)
