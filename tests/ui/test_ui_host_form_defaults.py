"""The host form shows and writes what [defaults] leaves a host: shared_fs, jump, python, workdir.

Seen: under ``[defaults] shared_fs = false`` the form showed every host ticked as on the shared
filesystem, and ticking could not write ``true``; jump, python and workdir had no field at all,
so a host behind the login node could only be added by hand."""

from __future__ import annotations

import tomllib

from hosts_support import fill, hosts_copy, open_add_form
from textual.widgets import Checkbox, Input
from ui_support import SIZE, run, wait_for

from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.hosts import HostsScreen

FILE = '''# lab
[defaults]
shared_fs = false   # no NFS here
jump = "login.example.org"

[[hosts]]
name = "a"          # keep this comment
address = "10.0.0.1"

[[hosts]]
name = "b"
address = "10.0.0.2"
shared_fs = true
'''


async def _edit(pilot, app, name: str) -> HostFormDialog:
    await wait_for(pilot, lambda: app.screen.table.row_count == 2)
    app.screen.table.select_key(name)
    await pilot.press("e")
    await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
    return app.screen


def test_the_form_shows_and_writes_what_defaults_leave_a_host(make_app, tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text(FILE)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await _edit(pilot, app, "b")
            assert form.query_one("#f-shared_fs", Checkbox).value, "b's own true"
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            form = await _edit(pilot, app, "a")
            box = form.query_one("#f-shared_fs", Checkbox)
            assert not box.value, "a takes [defaults]' false"
            # the value first: behind "[defaults]: " a python path never showed in its half row
            assert form.query_one("#f-jump", Input).placeholder.startswith("login.example.org (from [defaults])")
            assert form.query_one("#f-python", Input).placeholder == "default: python3 on the host"
            box.value = True
            await fill(pilot, form, jump="none", python="/opt/py/bin/python3", workdir="/scratch/heet")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            text = path.read_text()
            host = tomllib.loads(text)["hosts"][0]
            assert {k: host.get(k) for k in ("shared_fs", "jump", "python", "workdir")} == {
                "shared_fs": True, "jump": "", "python": "/opt/py/bin/python3", "workdir": "/scratch/heet"}
            assert 'name = "a"          # keep this comment' in text and text.endswith('shared_fs = true\n')
            form = await _edit(pilot, app, "a")  # read back as written: "none", the box ticked
            assert form.query_one("#f-jump", Input).value == "none" and form.query_one("#f-shared_fs", Checkbox).value
            form.query_one("#f-shared_fs", Checkbox).value = False  # back to the default: the key goes
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            assert "shared_fs" not in tomllib.loads(path.read_text())["hosts"][0]

    run(scenario())


def test_a_refused_save_goes_to_the_field_it_names(make_app, tmp_path):
    """A port typed as "Q": the error said so, and focus stayed on the last field, ten tabs away."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            await fill(pilot, form, name="new", port="Q")
            form.query_one("#f-workdir", Input).focus()
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.focused is form.query_one("#f-port", Input))
            await fill(pilot, form, port="70000")  # refused by the file's own checks: 'key "port"'
            form.query_one("#f-name", Input).focus()
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.focused is form.query_one("#f-port", Input))

    run(scenario())


def test_every_refusal_names_a_field_the_cursor_goes_to() -> None:
    """Seen: an emulate's GPU type went to the GPU type field and its speed or count nowhere; a
    duplicate name, a hand edit of the same key, and the ssh-alias question moved nothing."""
    from heet_tui.ui.dialogs.host_form import field_named

    said = {
        'hosts.toml:44: host "t4-box": emulate: key "gpu_type": "T 4" is not a valid GPU type name': "emulate",
        'hosts.toml:44: host "t4-box": emulate: key "speed": 5000 is out of range': "emulate",
        'hosts.toml:44: host "t4-box": emulate: key "count": must be >= 1, got 0': "emulate",
        'hosts.toml:38: duplicate host name "fast-a100" (first defined at line 12)': "name",
        "changed in the file since this form opened: tags (now inference, gpu-t4); save again": "tags",
        'spare-gpu is a host of your ssh config: Transport is "local (this machine)", which runs its jobs here; '
        "choose ssh to reach it, or save again to keep it local": "transport",
        "fast-a100 runs a: renamed, it is a new host to the controller, and it restarts there": "name",
        'hosts.toml:9: host "a": key "port": 70000 is out of range': "port",
        'hosts.toml:9: host "a": key "gpu_type": "T 4" is not a valid GPU type name': "gpu_type",
        "GPU index: \"x\" is not a whole number": "gpus",
    }
    assert {problem: field_named(problem) for problem in said} == said


def test_an_empty_python_field_says_what_a_local_host_runs(make_app, tmp_path):
    """It said "python3" for a local host, which runs heet-tui's own interpreter (the one with torch)."""
    from textual.widgets import Select

    path = tmp_path / "hosts.toml"
    path.write_text('[defaults]\nworkdir = "/scratch"\n\n[[hosts]]\nname = "here"\ntransport = "local"\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app, rows=1)
            python = form.query_one("#f-python", Input)
            assert python.placeholder == "default: heet-tui's own interpreter", "every host here is local"
            form.query_one("#f-transport", Select).value = "ssh"
            await wait_for(pilot, lambda: python.placeholder == "default: python3 on the host")
            assert form.query_one("#f-workdir", Input).placeholder == "/scratch (from [defaults])"

    run(scenario())
