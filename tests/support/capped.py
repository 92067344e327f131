"""Running heet-tui in a child with a memory cap and a timeout: for inputs that once read until
memory ran out (/dev/zero) or hung (a named pipe), so that a regression fails a test instead of
taking the machine down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CAPPED = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
          "from heet_tui.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")


def run_capped(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", CAPPED, *argv], capture_output=True, text=True, timeout=60, env=env)


def fifo_in(folder: Path) -> Path:
    path = folder / "pipe.csv"
    os.mkfifo(path)
    return path
