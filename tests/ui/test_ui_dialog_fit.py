"""Dialogs on small terminals: every field and button is reachable, by Tab and by the wheel.

At 80x24 the host form was cut off after its Transport row (no checkbox, error line or buttons,
no right border), and Tab past the visible part moved the focus out of sight.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual import events
from textual.widget import Widget
from textual.widgets import Button, Input, Static
from ui_support import fully_shown, open_tweak, run, wait_for

from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.help import HelpDialog
from heet_tui.ui.dialogs.host_form import TEXT_FIELDS, HostFormDialog
from heet_tui.ui.dialogs.host_key import HostKeyDialog
from heet_tui.ui.dialogs.job_log import JobLogDialog
from heet_tui.ui.dialogs.prompt import PromptDialog
from heet_tui.ui.dialogs.tweak import TweakDialog

SMALL = [(80, 24), (70, 20)]
HOSTS = Path(__file__).parent / "data" / "hosts_with_comments.toml"
HOST_FORM_ORDER = [f"f-{key}" for key, _, _ in TEXT_FIELDS] + ["f-transport", "f-shared_fs", "cancel", "save"]
TWEAK_ORDER = ["type", "count", "hosts", "pin", "hold", "cancel", "apply"]


@pytest.fixture
def hosts_copy(tmp_path) -> Path:
    """A hosts file the form may write to."""
    path = tmp_path / "hosts.toml"
    shutil.copy(HOSTS, path)
    return path


def dialog_box(app) -> Widget:
    return app.screen.children[0]


def box_fits(app) -> bool:
    """The whole box, its border included, inside the terminal."""
    return app.screen.region.contains_region(dialog_box(app).region)


async def tab_through(pilot, app, last: str) -> list[str]:
    """Tab from the first field to ``last``; every widget that takes the focus must be in view."""
    seen = [app.focused.id]
    assert fully_shown(app, app.focused), f"{app.focused.id} is not in view"
    for _ in range(20):
        if seen[-1] == last:
            break
        await pilot.press("tab")
        await pilot.pause()
        seen.append(app.focused.id)
        assert fully_shown(app, app.focused), f"{app.focused.id} took the focus out of view"
    return seen


async def open_host_form(pilot, app) -> HostFormDialog:
    await wait_for(pilot, lambda: app.screen.table.row_count == 2)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
    await pilot.pause()
    return app.screen


@pytest.mark.parametrize("size", SMALL)
def test_host_form_fits_a_small_terminal_and_tab_reaches_every_field(make_app, hosts_copy, size):

    async def scenario():
        app = make_app("hosts", hosts_path=hosts_copy)
        async with app.run_test(size=size) as pilot:
            form = await open_host_form(pilot, app)
            assert box_fits(app)
            for button in form.query(Button):
                assert fully_shown(app, button), f"{button.id} is not visible while the first field is"
            # every field in view at once: Emulate, Transport and the shared-FS box were below the fold
            for widget in [*form.query(Input), form.query_one("#f-transport"), form.query_one("#f-shared_fs")]:
                assert fully_shown(app, widget), f"{widget.id} is hidden until tabbed to"
            assert await tab_through(pilot, app, "save") == HOST_FORM_ORDER
            # the error line shows what is wrong wherever the user is in the form
            form.query_one("#f-name", Input).value = "a100-1"
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda: "already exists" in str(error.render()))
            await pilot.pause()
            assert fully_shown(app, error)

    run(scenario())


def test_the_wheel_scrolls_the_host_form(make_app, hosts_copy):

    async def scenario():
        app = make_app("hosts", hosts_path=hosts_copy)
        async with app.run_test(size=(70, 16)) as pilot:
            form = await open_host_form(pilot, app)
            checkbox = form.query_one("#f-shared_fs")
            assert not fully_shown(app, checkbox), "the case this test is about: the form is taller than the screen"
            box = dialog_box(app)
            for _ in range(10):  # the wheel over the fields (the pilot has no wheel of its own)
                await pilot._post_mouse_events([events.MouseScrollDown], widget=box, offset=(20, 5))
            await wait_for(pilot, lambda: fully_shown(app, checkbox))

    run(scenario())


def test_enter_in_a_host_form_field_moves_to_the_next_field(make_app, hosts_copy):

    async def scenario():
        app = make_app("hosts", hosts_path=hosts_copy)
        async with app.run_test(size=(80, 24)) as pilot:
            form = await open_host_form(pilot, app)
            await pilot.press(*"gpu9", "enter")
            assert app.focused is form.query_one("#f-address", Input)
            await pilot.press(*"10.0.0.9", "enter")
            assert app.focused is form.query_one("#f-port", Input)
            assert isinstance(app.screen, HostFormDialog), "enter moves on; it does not save"

    run(scenario())


@pytest.mark.parametrize("size", SMALL)
def test_tweak_fits_a_small_terminal_and_tab_reaches_every_field(make_app, size):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=size) as pilot:
            dialog = await open_tweak(pilot, app)
            assert box_fits(app)
            assert fully_shown(app, dialog.query_one("#apply", Button))
            assert fully_shown(app, dialog.query_one("#error", Static))
            assert await tab_through(pilot, app, "apply") == TWEAK_ORDER

    run(scenario())


def test_page_down_brings_the_tweak_prediction_into_view_on_a_70x20_terminal(make_app):
    """The prediction sits below the last field: no Tab reaches it, page down does."""

    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=(70, 20)) as pilot:
            dialog = await open_tweak(pilot, app)
            prediction = dialog.query_one("#prediction", Static)
            assert not fully_shown(app, prediction), "the case this test is about: it does not fit"
            await pilot.press("pagedown")
            await wait_for(pilot, lambda: fully_shown(app, prediction))
            assert app.focused is dialog.query_one("#type"), "scrolling leaves the focus where it was"

    run(scenario())


def test_enter_in_a_tweak_field_moves_to_the_next_field(make_app, backend):
    async def scenario():
        app = make_app("plan")
        async with app.run_test(size=(80, 24)) as pilot:
            dialog = await open_tweak(pilot, app)
            dialog.query_one("#count", Input).focus()
            await pilot.press("3", "enter")
            assert app.focused is dialog.query_one("#hosts", Input)
            assert isinstance(app.screen, TweakDialog) and backend.posted == []

    run(scenario())


def other_dialogs():
    long = "Cancel job cifar10-resnet18-sweep-lr0.1-seed3 (resnet)? " * 3
    return {
        "confirm": lambda: ConfirmDialog(long, yes="Cancel job"),
        "host key": lambda: HostKeyDialog("gpu-new", "SHA256:q7Vb3kXo1mZ9d2Y4rT6uW8eA0sC5fH7jK9lN1pR3tU5",
                                          "HOST KEY CHANGED for gpu-new at 10.0.0.9: " + "detail " * 20),
        "prompt": lambda: PromptDialog("Job spec to submit (a job.toml, a directory of them or a glob):",
                                       [f"examples/job-{i}.toml" for i in range(9)]),
        "help": HelpDialog,
        "job log": lambda: JobLogDialog("j1", lambda job_id: _lines()),
    }


async def _lines() -> tuple[str, ...]:
    return tuple(f"step {i}" for i in range(200))


async def _over_the_jobs_screen(pilot, app, name: str) -> None:
    await wait_for(pilot, lambda: app.latest is not None)
    app.push_screen(other_dialogs()[name]())
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("name", list(other_dialogs()))
def test_every_other_dialog_fits_a_70x20_terminal(make_app, name):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(70, 20)) as pilot:
            await _over_the_jobs_screen(pilot, app, name)
            assert box_fits(app), f"{name}: {dialog_box(app).region} does not fit {app.screen.region}"
            for button in app.screen.query(Button):
                assert fully_shown(app, button), f"{name}: {button.id} is not visible"

    run(scenario())


@pytest.mark.parametrize(("name", "keys"), [("confirm", {"y Yes", "n No"}), ("host key", {"esc Not now"}),
                                            ("prompt", {"esc Cancel"})])
def test_a_dialog_footer_names_its_own_keys_not_the_screens_below(make_app, name, keys):
    """The Jobs screen's footer stayed under a cancel question, reading "n Submit" where n said No."""
    async def scenario():
        from ui_support import footer

        app = make_app("jobs")
        async with app.run_test(size=(80, 24)) as pilot:
            await _over_the_jobs_screen(pilot, app, name)
            shown = footer(app)
            assert keys <= shown and not any("Submit" in entry for entry in shown), shown
            assert box_fits(app), f"{name}: {dialog_box(app).region} does not fit with its footer"

    run(scenario())


def test_the_tweak_dialogs_footer_names_its_keys_not_the_plan_screens(make_app):
    async def scenario():
        from ui_support import footer

        app = make_app("plan")
        async with app.run_test(size=(80, 24)) as pilot:
            await open_tweak(pilot, app)
            await wait_for(pilot, lambda: "^s Apply" in footer(app))
            assert "esc Cancel" in footer(app) and "a Approve" not in footer(app), footer(app)

    run(scenario())
