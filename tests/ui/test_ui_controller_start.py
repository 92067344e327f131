"""A TUI opened on a hosts file that does not load starts its controller once the file is fixed.

Seen: the file restored (back on its NFS mount, or a syntax error mended), the header still said
"controller not available: the hosts file is all there is to see", and the Jobs screen stayed
empty beside seven stored jobs until the TUI was restarted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from textual.widgets import Static
from ui_support import run, wait_for

from heet_tui.ui.app import HeetApp
from heet_tui.ui.backends import choose_backend

GOOD = """[defaults]
python = "{python}"

[[hosts]]
name = "only"
transport = "local"
workdir = "{work}"
emulate = {{ gpu_type = "T4", count = 1, speed = 1.0 }}
"""


def test_the_controller_starts_once_the_hosts_file_reads_well(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    good = GOOD.format(python=sys.executable, work=tmp_path / "work")
    path.write_text(good.replace("[[hosts]]", "[[hosts]"))  # a syntax error
    choice = choose_backend(argparse.Namespace(hosts=str(path), state=str(tmp_path / "state"), demo=False))
    assert choice.backend is None and "fix the hosts file to start the controller" in choice.notice
    assert choice.retry is not None

    async def scenario() -> None:
        app = HeetApp(choice.backend, choice.hosts_path, notice=choice.notice, start_mode=choice.start_mode,
                      retry=choice.retry)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.5)
            app.start_controller_again()
            assert app.backend is None, "the file as it was: not tried again"
            problem = app.screen.query_one("#hosts-problem", Static)
            path.write_text(good.replace("count = 1", "count = 0"))  # another mistake: shown as it is now
            await wait_for(pilot, lambda: 'key "count"' in str(problem.render()), tries=600)
            path.write_text(good)
            path.chmod(0o666)  # refused: every user may write it
            await wait_for(pilot, lambda: "every user can write it" in str(problem.render()), tries=600)
            assert app.backend is None
            path.chmod(0o600)
            tmp_path.chmod(0o777)  # the directory above it, now: refused for that
            await wait_for(pilot, lambda: "may be written by every user" in str(problem.render()), tries=600)
            assert app.backend is None
            tmp_path.chmod(0o700)  # as the refusal asks: no edit, no key pressed in the TUI
            await wait_for(pilot, lambda: app.latest is not None and app.latest.mode == "controller", tries=600)
            assert [h.name for h in app.latest.hosts] == ["only"]
            assert app.retry is None

    run(scenario())
