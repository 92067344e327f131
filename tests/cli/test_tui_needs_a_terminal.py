"""The TUI refuses to start without a terminal instead of drawing its screens into a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_tui_with_its_output_redirected_says_what_to_run_instead(tmp_path: Path) -> None:
    """`heet-tui --read-only > out.txt` drew the full-screen app into the file until killed."""
    out = tmp_path / "out.txt"
    with open(out, "w") as fh:
        done = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "--read-only", "--state",
                               str(tmp_path / "state")], stdin=subprocess.DEVNULL, stdout=fh,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "the TUI needs a terminal" in done.stderr and "heet-tui run" in done.stderr
    assert out.read_text() == ""
    assert not (tmp_path / "state").exists(), "nothing was started"
