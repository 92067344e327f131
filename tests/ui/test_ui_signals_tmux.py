"""The TUI ended by SIGTERM or SIGHUP (the SSH session dropped) ends as q ends it: killed, it left
the terminal in the alternate screen with mouse reporting on, and its controller stopped without
a word in the log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ui_demo_tmux import Tmux

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_tui_and_its_controller_in_order(tmp_path: Path, sig: signal.Signals) -> None:
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[[hosts]]\nname = "only"\ntransport = "local"\npython = "{sys.executable}"\n'
                     f'workdir = "{tmp_path / "w"}"\nemulate = {{ gpu_type = "T4", count = 1 }}\n')
    state = tmp_path / "state"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_STATE_HOME": str(tmp_path / "xdg"),
           "TERM": "xterm-256color", "HOME": str(tmp_path)}
    heet = Path(sys.executable).with_name("heet-tui")
    session = Tmux(f"heet-sig-{os.getpid()}-{sig.value}", f"{heet} --hosts {hosts} --state {state}", env)
    try:
        session.wait_for("Cluster")
        session.wait_for("only")
        found = subprocess.run(["pgrep", "-f", f"heet-tui --hosts {hosts}"], capture_output=True, text=True).stdout
        # the TUI's python, not the tmux server or the shell whose command lines name it too
        pids = [int(p) for p in found.split() if b"python" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
        assert len(pids) == 1, found
        os.kill(pids[0], sig)
        session.wait_for(f"EXITED-{128 + sig.value}", timeout=30)
        time.sleep(0.3)
        shown = subprocess.run(["tmux", "display-message", "-p", "-t", session.name, "#{alternate_on}"],
                               capture_output=True, text=True).stdout.strip()
        assert shown == "0", "the terminal is back from the alternate screen"
        assert "controller stopping" in (state / "controller.log").read_text()
    finally:
        session.close()
