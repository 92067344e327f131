"""What the Hosts screen tests share: the commented hosts file, the form, a hand edit meanwhile."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import Input
from ui_support import wait_for

from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.hosts import HostsScreen

DATA = Path(__file__).parent / "data"
COMMENTS = ("# Lab cluster: keep this comment.", "# everyone logs in as alice", "# The A100 box in rack 1.",
            "# The old T4 node.")


def hosts_copy(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    shutil.copy(DATA / "hosts_with_comments.toml", path)
    return path


async def open_add_form(pilot, app, rows: int = 2) -> HostFormDialog:
    """The hosts screen with its ``rows`` hosts (the fixture's two), then n: the empty form."""
    await wait_for(pilot, lambda: app.screen.table.row_count == rows)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
    return app.screen


async def fill(pilot, dialog: HostFormDialog, **values: str) -> None:
    for key, value in values.items():
        dialog.query_one(f"#f-{key}", Input).value = value
    await pilot.pause()


async def save_form_edited_meanwhile(pilot, app, backend, key: str, rows: int, path: Path, hand_edit: tuple[str, str],
                                     **fields: str) -> None:
    """Open host ``key``'s form, edit the file by hand meanwhile (``hand_edit``: old, new text;
    the screen behind reads it again), fill ``fields`` and save."""
    from ui_fakes import small_snapshot

    screen = app.screen
    await wait_for(pilot, lambda: screen.table.row_count == rows)
    screen.table.select_key(key)
    await pilot.press("e")
    await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
    form = app.screen
    path.write_text(path.read_text().replace(*hand_edit))
    backend.push(small_snapshot(1))
    await pilot.pause()
    await fill(pilot, form, **fields)
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
