"""SVG snapshots of the main screens, compared with the exported SVGs stored in tests/ui/snapshots.

Run with ``HEET_UPDATE_SNAPSHOTS=1`` to (re)write them after an intended change, then look at
the new SVGs in a browser before committing them.
"""

from __future__ import annotations

import difflib
import os
import re
import time
from pathlib import Path

import pytest
from ui_support import footer, run, wait_for

from heet_tui.ui.dialogs.tweak import TweakDialog

SNAPSHOTS = Path(__file__).parent / "snapshots"
DATA = Path(__file__).parent / "data"
SIZE = (130, 36)
UPDATE = os.environ.get("HEET_UPDATE_SNAPSHOTS") == "1"


@pytest.fixture
def utc(monkeypatch):
    """The controller's clock is shown in local time: pin the zone so the pictures do not depend on it."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def normalise(svg: str) -> str:
    """Rich names its CSS classes after a hash of the content; keep diffs about the content itself."""
    return re.sub(r"terminal-\d+", "terminal", svg)


def compare(name: str, svg: str, tmp_path: Path) -> None:
    stored = SNAPSHOTS / f"{name}.svg"
    actual = normalise(svg)
    if UPDATE or not stored.exists():
        if not UPDATE:
            pytest.fail(f"no stored snapshot {stored}; run with HEET_UPDATE_SNAPSHOTS=1 to create it")
        stored.write_text(actual, encoding="utf-8")
        return
    expected = stored.read_text(encoding="utf-8")
    if actual != expected:
        out = tmp_path / f"{name}.svg"
        out.write_text(actual, encoding="utf-8")
        diff = "\n".join(list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), lineterm="",
                                                   n=0))[:20])
        pytest.fail(f"{name}: screen differs from {stored} (new one at {out}):\n{diff}")


@pytest.mark.parametrize("mode", ["cluster", "jobs", "plan", "profiles", "hosts"])
def test_main_screen_matches_snapshot(make_app, mode, tmp_path, monkeypatch, utc):
    monkeypatch.chdir(DATA)  # the Hosts screen shows the path as given: keep it machine-independent

    async def scenario():
        app = make_app(mode, hosts_path=Path("hosts_with_comments.toml"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            # the footer lays itself out again once it knows its width (compact below 100 columns):
            # under load the picture was taken before, compact at 130 columns
            await wait_for(pilot, lambda: "^p palette" in footer(app))
            await pilot.pause()
            compare(mode, app.export_screenshot(), tmp_path)

    run(scenario())


def test_tweak_dialog_matches_snapshot(make_app, tmp_path, utc):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            app.screen.query_one("#plan").select_key("j1")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, TweakDialog) and app.screen.previews >= 1)
            await pilot.pause()
            compare("tweak", app.export_screenshot(), tmp_path)

    run(scenario())
