"""The host form and a hand edit of the same field while it is open."""

from __future__ import annotations

import tomllib

from hosts_support import fill, hosts_copy
from textual.widgets import Static
from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.hosts import HostsScreen


def test_a_field_changed_by_hand_while_the_form_is_open_is_not_written_over_unasked(make_app, backend, tmp_path):
    """Seen: rack set to "rackB-hand" in the file, "rackB-form" typed in the open form, saved:
    "saved host", the file said rackB-form, and nothing said the hand edit was gone."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            screen.table.select_key("t4-1")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
            form = app.screen
            path.write_text(path.read_text().replace('address = "10.0.0.12"', 'address = "10.0.0.99"'))
            backend.push(small_snapshot(1))  # the screen behind reads the file again
            await pilot.pause()
            await fill(pilot, form, address="10.0.0.50")
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda: "changed in the file since this form opened" in str(error.render()))
            assert "address (now 10.0.0.99)" in str(error.render())
            assert tomllib.loads(path.read_text())["hosts"][1]["address"] == "10.0.0.99", "nothing written yet"
            path.write_text(path.read_text().replace('address = "10.0.0.99"', 'address = "10.0.0.98"'))
            backend.push(small_snapshot(2))  # changed by hand again: the question was about .99
            await pilot.pause()
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: "address (now 10.0.0.98)" in str(error.render()))
            assert tomllib.loads(path.read_text())["hosts"][1]["address"] == "10.0.0.98"
            await pilot.press("ctrl+s")  # asked about what is there, and meant
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            assert tomllib.loads(path.read_text())["hosts"][1]["address"] == "10.0.0.50"

    run(scenario())


def test_renaming_a_host_that_runs_a_job_says_the_job_restarts_and_asks_again(make_app, backend, tmp_path):
    """A rename is a new host to the controller: j2 was moved off the old name onto the same GPU
    (a restart), with nothing said; the Remove dialog warns, the form did not."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            backend.push(small_snapshot(1))  # j2 runs on t4-1
            await wait_for(pilot, lambda: screen.table.row_count == 2 and screen.latest is not None)
            screen.table.select_key("t4-1")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
            form = app.screen
            await fill(pilot, form, name="t4-one")
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda: "t4-1 runs j2: renamed, it is a new host" in str(error.render()))
            assert [h["name"] for h in tomllib.loads(path.read_text())["hosts"]][1] == "t4-1", "not renamed yet"
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            assert [h["name"] for h in tomllib.loads(path.read_text())["hosts"]][1] == "t4-one"

    run(scenario())
