"""Hosts screen: add, edit, remove through the form; the TOML keeps its comments; bad input explained."""

from __future__ import annotations

import tomllib

from hosts_support import COMMENTS, fill, hosts_copy, open_add_form, save_form_edited_meanwhile
from textual.widgets import Input, Static
from textual.widgets._toast import Toast
from ui_support import SIZE, run, wait_for

from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.host_form import HostFormDialog
from heet_tui.ui.screens.hosts import HostsScreen


def test_add_edit_remove_round_trip_keeps_comments(make_app, tmp_path):
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            assert isinstance(screen, HostsScreen)
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
            await fill(pilot, app.screen, name="rtx-1", address="10.0.0.13", gpus="0,1", rack="r3",
                       emulate="RTX2080Ti:2:0.5")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen) and screen.table.row_count == 3)
            data = tomllib.loads(path.read_text())
            assert data["hosts"][2] == {"name": "rtx-1", "address": "10.0.0.13", "gpus": [0, 1], "rack": "r3",
                                        "emulate": {"gpu_type": "RTX2080Ti", "count": 2, "speed": 0.5}}
            assert screen.table.selected_key == "rtx-1"

            screen.table.select_key("t4-1")
            await pilot.press("e")
            await wait_for(pilot, lambda: isinstance(app.screen, HostFormDialog))
            form = app.screen
            assert form.query_one("#f-gpu_type", Input).value == "T4"  # the host's own keys fill the form
            await fill(pilot, form, rack="r9", gpu_type="")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen))
            t4 = tomllib.loads(path.read_text())["hosts"][1]
            assert t4 == {"name": "t4-1", "address": "10.0.0.12", "rack": "r9"}

            screen.table.select_key("rtx-1")
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("y")
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            text = path.read_text()
            assert [h["name"] for h in tomllib.loads(text)["hosts"]] == ["a100-1", "t4-1"]
            for comment in COMMENTS:
                assert comment in text, comment
            assert (tmp_path / "hosts.toml.bak").exists()

    run(scenario())


def test_invalid_host_is_explained_in_the_form_and_nothing_is_saved(make_app, tmp_path):
    path = hosts_copy(tmp_path)
    before = path.read_text()

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            await fill(pilot, form, name="a100-1")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: "already exists" in str(form.query_one("#form-error", Static).render()))
            await fill(pilot, form, name="new-1", port="22x")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: '"22x" is not a whole number' in str(form.query_one("#form-error",
                                                                                                Static).render()))
            await fill(pilot, form, port="70000")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: "out of range" in str(form.query_one("#form-error", Static).render()))
            assert isinstance(app.screen, HostFormDialog)
            await pilot.press("escape")
            assert path.read_text() == before

    run(scenario())


def test_broken_file_is_reported_with_its_line(make_app, tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "a"\ngpus = "zero"\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            problem = str(app.screen.query_one("#hosts-problem", Static).render())
            assert "hosts.toml:3" in problem and "gpus" in problem
            assert app.screen.check_action("add_host", ()) is False  # hidden, not merely dimmed

    run(scenario())


def test_saving_the_form_after_the_file_broke_on_disk_says_so_in_the_form(make_app, tmp_path):
    """The form was open while an editor in another shell left the file half-typed: ctrl+s hit an
    assert, and the TUI (with the controller it ran) exited."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            await fill(pilot, form, name="rtx-1", address="10.0.0.13")
            good = path.read_text()
            with open(path, "a") as fh:
                fh.write('\n[[hosts]]\nname = "half-typed\n')
            app.screen_stack[-2].action_reload(toast=False)  # what the next snapshot does
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: "TOML syntax error" in str(form.query_one("#form-error", Static).render()))
            assert isinstance(app.screen, HostFormDialog) and form.query_one("#f-name", Input).value == "rtx-1"
            # "o opens it in your editor" typed an o into the field: o is the screen's key, behind the form
            assert "Esc, then o on the Hosts screen" in str(form.query_one("#form-error", Static).render())
            path.write_text(good)  # fixed in the editor: the same form saves
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, HostsScreen) and app.screen.table.row_count == 3)
            assert 'name = "rtx-1"' in path.read_text()

    run(scenario())


def test_a_problem_that_quotes_toml_brackets_is_shown_whole_and_a_stray_tag_cannot_crash(make_app, tmp_path):
    # Rendered as markup, "write it as [defaults]" lost its "[defaults]", and a notice holding
    # "[/]" (a path, a host's error) raised MarkupError and took the whole app down.
    path = tmp_path / "hosts.toml"
    path.write_text('defaults = 1\n[[hosts]]\nname = "a"\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            problem = str(app.screen.query_one("#hosts-problem", Static).render())
            assert "write it as [defaults]" in problem
            app.notify("cannot read /data/[/]odd/job.toml")
            await pilot.pause()
            notice = next(n for n in app._notifications if "odd" in n.message)
            toast = Toast(notice)  # what the app shows for it
            await app.screen.mount(toast)
            assert "/data/[/]odd/job.toml" in str(toast.render())

    run(scenario())


def test_open_in_editor_reloads_and_revalidates(make_app, tmp_path, monkeypatch):
    """The editor is a real subprocess; only the terminal hand-over (suspend) is skipped headless."""
    import contextlib

    path = hosts_copy(tmp_path)
    monkeypatch.setenv("EDITOR", "sed -i s/t4-1/t4-2/")

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        monkeypatch.setattr(app, "suspend", contextlib.nullcontext)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            await pilot.press("o")
            await wait_for(pilot, lambda: "t4-2" in [screen.table.get_row_at(i)[0] for i in range(2)])
            assert screen.problem == ""
            monkeypatch.setenv("EDITOR", "sed -i s/^rack/rak/")  # the user saves a typo
            await pilot.press("o")
            await wait_for(pilot, lambda: screen.problem != "")
            assert 'unknown key "rak"' in screen.problem and "hosts.toml:9" in screen.problem
            assert screen.table.row_count == 2  # the last good table stays on screen

    run(scenario())


def test_the_demo_says_its_cluster_is_not_the_hosts_file(make_app, backend, tmp_path):
    from dataclasses import replace

    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            line = app.screen.query_one("#hosts-path", Static)
            await wait_for(pilot, lambda: app.latest is not None)
            assert "simulated" not in str(line.render()), "a real controller runs on this very file"
            backend.push(replace(backend.current, mode="demo"))
            await wait_for(pilot, lambda: "simulated cluster" in str(line.render()))
            assert str(path) in str(line.render())

    run(scenario())


def test_the_add_form_takes_typing_at_once(make_app, tmp_path):
    # A user presses n and types the name: the keys must land in the Name field, not in the
    # scrolling container around the fields (which took the focus first, and the keys were lost).
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            await pilot.press(*"rtx-1")
            assert form.query_one("#f-name", Input).value == "rtx-1"

    run(scenario())


def test_a_file_changed_outside_the_app_is_read_again_with_the_next_update(make_app, backend, tmp_path):
    """Before, the ✗ line kept the error of a version of the file already fixed in another shell
    (and the new error was only in a passing toast) until ctrl+r."""
    from ui_fakes import small_snapshot

    path = hosts_copy(tmp_path)
    good = path.read_text()

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            line = screen.query_one("#hosts-problem", Static)
            await wait_for(pilot, lambda: screen.table.row_count == 2)
            path.write_text(good.replace('rack = "r2"', 'rakc = "r2"'))
            backend.push(small_snapshot(1))
            await wait_for(pilot, lambda: 'unknown key "rakc"' in str(line.render()))
            path.write_text(good.replace('name = "t4-1"', 'name = "t4-2"'))
            backend.push(small_snapshot(2))
            await wait_for(pilot, lambda: str(line.render()) == "" and screen.table.get_row("t4-2") is not None)

    run(scenario())


def test_the_edit_form_writes_only_what_was_changed_in_it(make_app, backend, tmp_path):
    """Seen: a hand edit of the same host made while its form was open (the file read again
    meanwhile) was undone by the save, which wrote back every field as the form was opened."""
    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await save_form_edited_meanwhile(pilot, app, backend, "t4-1", 2, path,
                                             ('address = "10.0.0.12"', 'address = "10.0.0.99"  # moved'), tags="x")
            text = path.read_text()
            assert 'address = "10.0.0.99"  # moved' in text, text
            assert tomllib.loads(text)["hosts"][1]["tags"] == ["x"]

    run(scenario())


def test_a_count_changed_in_the_form_keeps_the_speed_tuned_by_hand_meanwhile(make_app, backend, tmp_path):
    """Emulate is one field (TYPE:COUNT:SPEED): changing its count wrote the form's speed over
    the one set by hand while the form was open, under the hand edit's own comment."""
    path = tmp_path / "hosts.toml"
    path.write_text('[[hosts]]\nname = "e1"\ntransport = "local"\n'
                    'emulate = { gpu_type = "V100", count = 2, speed = 0.5 }\n')

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await save_form_edited_meanwhile(pilot, app, backend, "e1", 1, path,
                                             ("speed = 0.5 }", "speed = 0.6 }  # hand-tuned"), emulate="V100:1:0.5")
            text = path.read_text()
            assert tomllib.loads(text)["hosts"][0]["emulate"] == {"gpu_type": "V100", "count": 1, "speed": 0.6}, text
            assert "# hand-tuned" in text

    run(scenario())


def test_removing_a_host_that_runs_jobs_says_what_becomes_of_them(make_app, backend, tmp_path):
    """It asked only "Remove host t4-1 from hosts.toml?" while j2 ran there."""
    from ui_fakes import small_snapshot

    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            backend.push(small_snapshot(1))
            await wait_for(pilot, lambda: screen.table.row_count == 2 and screen.latest is not None)
            screen.table.select_key("t4-1")
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            said = " ".join(str(s.render()) for s in app.screen.query(Static))
            assert "It runs j2: drained first, it moves off at the next plan you approve" in said, said
            await pilot.press("n")

    run(scenario())


def test_a_checkbox_shows_its_state_without_colour(make_app, tmp_path):
    """Both states drew an X (dim when off): with NO_COLOR or 16 colours, off read as on."""
    from textual.widgets import Checkbox

    path = hosts_copy(tmp_path)

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            box = form.query_one("#f-shared_fs", Checkbox)
            assert box.value and "▐X▌" in str(box.render())
            box.value = False
            await pilot.pause()
            assert "▐ ▌" in str(box.render()) and "X" not in str(box.render())

    run(scenario())


def test_the_table_keeps_the_files_order_when_a_host_comes_back(make_app, backend, tmp_path):
    """A host removed and restored (cp hosts.toml.bak hosts.toml) came back at the bottom; Down
    then selected another host than the file's next one, and an edit went to the wrong host."""
    from ui_fakes import small_snapshot

    path = hosts_copy(tmp_path)
    good = path.read_text()
    first, second = good.split("[[hosts]]", 1)[0], "[[hosts]]" + good.split("[[hosts]]", 2)[2]

    async def scenario():
        app = make_app("hosts", hosts_path=path)
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.table
            await wait_for(pilot, lambda: table.row_count == 2)
            assert [table.get_row_at(i)[0] for i in range(2)] == ["a100-1", "t4-1"]
            path.write_text(first + second)  # a100-1 removed
            backend.push(small_snapshot(1))
            await wait_for(pilot, lambda: table.row_count == 1)
            path.write_text(good)  # and back
            backend.push(small_snapshot(2))
            await wait_for(pilot, lambda: table.row_count == 2)
            assert [table.get_row_at(i)[0] for i in range(2)] == ["a100-1", "t4-1"]

    run(scenario())


