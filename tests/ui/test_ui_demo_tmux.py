"""Smoke test: `heet-tui --demo` in a real terminal (tmux), driven by keys, read with capture-pane.

The demo runs the real simulator and scheduler on the reference cluster, with the tiny profile
subset shipped under tests/data (so this passes without ../shared).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ui_fakes import profile_dir

pytestmark = pytest.mark.slow


class Tmux:
    def __init__(self, name: str, command: str, env: dict[str, str]) -> None:
        self.name = name
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "150", "-y", "42",
                        f"env {exports} {command}; echo EXITED-$?; sleep 30"], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True,
                              text=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.3)
        raise AssertionError(f"{text!r} never appeared; screen was:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_demo_shows_a_plan_approves_it_jobs_run_and_a_job_is_submitted(tmp_path):
    env = {"HEET_PROFILES": str(profile_dir(tmp_path)), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "TERM": "xterm-256color", "HEET_SHARED": str(tmp_path / "none")}
    heet = Path(sys.executable).with_name("heet-tui")
    session = Tmux(f"heet-smoke-{os.getpid()}", f"{heet} --demo", env)
    try:
        session.wait_for("demo  t=")  # the Jobs screen with the first simulated snapshot
        session.keys("3")
        screen = session.wait_for("Plan #1 by heet")  # not "No plan pending", shown before the first round
        assert "start" in screen
        session.wait_for("a Approve")  # the footer offers it once a plan is pending (a frame later)
        session.keys("a")
        session.keys("2")
        screen = session.wait_for("running")
        assert "cifar10-1" in screen
        session.keys("C-p")  # the command palette: submit an example job spec
        session.wait_for("Search for commands")
        session.keys("submit job small")
        session.wait_for("small-cnn.toml")
        session.keys("Enter")
        session.wait_for("small-cnn ")
        session.keys("q")
        session.wait_for("EXITED-0", timeout=20)
    finally:
        session.close()
