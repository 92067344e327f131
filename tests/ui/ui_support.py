"""Helpers for the UI tests (a module of its own: ``conftest`` is not importable by name when
several test folders each have one)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from textual.pilot import Pilot
from textual.widget import Widget

from heet_tui.ui.dialogs.tweak import TweakDialog
from heet_tui.ui.widgets.job_table import JobTable
from heet_tui.ui.widgets.plan_table import PlanTable

SIZE = (150, 45)


async def wait_for(pilot: Pilot, condition: Callable[[], bool], tries: int = 100, least_s: float = 10.0) -> None:
    """Let the app process messages until ``condition`` holds (bounded, so a bug fails, never hangs):
    ``tries`` pauses and at least ``least_s`` seconds, as a loaded machine draws a frame in seconds."""
    deadline = time.monotonic() + least_s
    for attempt in itertools.count():
        if condition():
            return
        if attempt >= tries and time.monotonic() > deadline:
            break
        await pilot.pause(0.02)
    assert condition(), "condition never became true"


def footer(app) -> set[str]:
    """The footer's entries, as "x Cancel": what the user is offered now."""
    from textual.widgets._footer import FooterKey

    return {f"{k.key_display} {k.description}" for k in app.screen.query(FooterKey)}


def fully_shown(app, widget: Widget) -> bool:
    """On screen, its first and last cells not covered by anything else (a docked foot, the box's
    edge) nor scrolled away: what the user actually sees of it."""
    region = widget.region
    if not region or not app.screen.region.contains_region(region):
        return False
    for x, y in ((region.x, region.y), (region.right - 1, region.bottom - 1)):
        try:
            under, _ = app.get_widget_at(x, y)
        except Exception:  # nothing there (scrolled out of the box's clip)
            return False
        if under is not widget and widget not in under.ancestors:
            return False
    return True


def run(coro) -> None:
    """pytest-asyncio is not a dependency: each test drives its own event loop."""
    asyncio.run(coro)


async def open_tweak(pilot: Pilot, app) -> TweakDialog:
    """The Plan screen's tweak dialog on the fake plan's job j1, once its first prediction came."""
    table = app.screen.query_one(PlanTable)
    await wait_for(pilot, lambda: table.row_count == 3)
    table.select_key("j1")
    await pilot.press("e")
    await wait_for(pilot, lambda: isinstance(app.screen, TweakDialog))
    dialog = app.screen
    await wait_for(pilot, lambda: dialog.previews >= 1)
    return dialog


async def four_jobs(pilot: Pilot, app) -> JobTable:
    """The jobs table once the fixture's four jobs are in it."""
    table = app.screen.query_one(JobTable)
    await wait_for(pilot, lambda: table.row_count == 4)
    return table
