"""Hosts screen: hosts added to the bundled config, to a file of local hosts, and local hosts given
what only SSH uses (the form asks which was meant)."""

from __future__ import annotations

import shutil
import tomllib

from hosts_support import fill, hosts_copy, open_add_form
from textual.widgets import Input, Static
from ui_support import SIZE, run, wait_for

from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.hosts import HostsScreen


def test_adding_a_host_to_the_bundled_config_saves_it_in_the_users_own_file(make_app):
    from heet_tui.config.hosts_file import bundled_config, user_hosts_path

    bundled = bundled_config("local.toml")
    before = bundled.read_text()

    async def scenario():
        app = make_app("hosts", hosts_path=bundled)  # `make run` on a fresh machine
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            row = screen.table.get_row("local-a100")
            assert (row[2], row[4], row[5]) == ("-", "-", "-"), "no address, login or port for a local host"
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
            await fill(pilot, app.screen, name="gpu9", emulate="V100:2:0.5")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen) and screen.table.row_count == 3)
            assert screen.path == app.hosts_path == user_hosts_path()
            assert str(user_hosts_path()) in str(screen.query_one("#hosts-path", Static).render())

    run(scenario())
    assert bundled.read_text() == before
    assert [h["name"] for h in tomllib.loads(user_hosts_path().read_text())["hosts"]] == ["local-a100", "local-t4",
                                                                                          "gpu9"]


def test_a_host_added_to_a_file_of_local_hosts_is_local_too(make_app, repo, tmp_path):
    """On the bundled config a newcomer's emulated host was added as ssh (the form's default) and
    was "unreachable: cannot connect to emu:22: Name or service not known"."""
    from textual.widgets import Select

    path = tmp_path / "hosts.toml"
    shutil.copy(repo / "configs" / "local.toml", path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            assert form.query_one("#f-transport", Select).value == "local"
            await fill(pilot, form, name="emu", emulate="T4:1:0.5")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen) and app.screen.table.row_count == 3)
            added = next(h for h in tomllib.loads(path.read_text())["hosts"] if h["name"] == "emu")
            assert added["transport"] == "local"
        async with make_app("hosts", hosts_path=hosts_copy(tmp_path)).run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, pilot.app)
            assert form.query_one("#f-transport", Select).value == "ssh", "a file of ssh hosts"

    run(scenario())


def test_a_host_of_the_users_ssh_config_added_as_local_is_asked_about_first(make_app, repo, tmp_path):
    """A newcomer's lab machine, an alias in ~/.ssh/config, was added as a local host (the form's
    default on the bundled config): its jobs ran on the login node, and nothing said so."""
    path = tmp_path / "hosts.toml"
    config = tmp_path / "ssh_config"
    config.write_text("Host lab-a lab-*\n  HostName 10.0.0.2\n")
    path.write_text((repo / "configs" / "local.toml").read_text().replace("[defaults]\n",
                                                                          f'[defaults]\nssh_config = "{config}"\n'))

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            await fill(pilot, form, name="lab-a", emulate="A100:2:1")
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda: "lab-a is a host of your ssh config" in str(error.render()))
            assert "lab-a" not in path.read_text(), "not saved yet"
            await pilot.press("ctrl+s")  # saved again: kept local, as asked
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen) and app.screen.table.row_count == 3)

    run(scenario())


def test_a_local_host_given_an_address_is_asked_to_choose(make_app, tmp_path):
    """Name "spare", Address "spare-gpu", Transport local: saved, and its jobs ran on this machine;
    `hosts add --transport local --address` is refused for the same reason."""
    from textual.widgets import Select

    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "here"\ntransport = "local"\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app, rows=1)
            assert form.query_one("#f-transport", Select).value == "local", "every host of the file is local"
            await fill(pilot, form, name="spare", address="spare-gpu")
            await pilot.press("ctrl+s")
            error = form.query_one("#form-error", Static)
            await wait_for(pilot, lambda: "address: a local host runs on this machine" in str(error.render()))
            assert "choose ssh to reach spare-gpu" in str(error.render())
            assert app.focused is form.query_one("#f-address", Input)
            assert "spare" not in path.read_text()
            form.query_one("#f-transport", Select).value = "ssh"
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            saved = tomllib.loads(path.read_text())["hosts"][1]
            assert saved["address"] == "spare-gpu" and "transport" not in saved

    run(scenario())
