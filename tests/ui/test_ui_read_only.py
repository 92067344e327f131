"""--read-only: nothing that changes anything is offered, bound, or sent."""

from __future__ import annotations

from textual.widgets import Footer
from ui_support import SIZE, run, wait_for

from heet_tui.core.intents import SubmitJob
from heet_tui.ui.commands import HeetCommands


def test_read_only_hides_every_changing_action(make_app, backend, tmp_path):
    async def scenario():
        app = make_app("plan", read_only=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            shown = {b.action for b in (x.binding for x in app.screen.active_bindings.values()) if b.show}
            enabled = {x.binding.action for x in app.screen.active_bindings.values() if x.enabled}
            assert not {"approve", "reject", "tweak", "toggle_auto", "replan"} & enabled
            assert "switch_mode('jobs')" in shown
            await pilot.press("a", "r", "t", "e", "p")
            for mode, keys in (("jobs", ("x", "n")), ("cluster", ("d", "c")), ("hosts", ("n", "x", "o"))):
                app.switch_mode(mode)
                await pilot.pause()
                await pilot.press(*keys)
                await pilot.pause()
                assert not any(x.enabled for x in app.screen.active_bindings.values()
                               if x.binding.action in {"cancel_job", "submit_job", "drain", "connect", "add_host",
                                                       "remove_host", "open_editor", "edit_host"})
            assert app.screen.query_one(Footer) is not None
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            assert names and all(name.startswith("go to") for name in names)
            assert backend.posted == []

    run(scenario())


def test_a_tui_attached_to_a_watch_only_controller_offers_nothing(make_app, backend):
    # Opened without --read-only beside `heet-tui --read-only`'s controller, it offered every
    # action, and the controller refused each one.
    from dataclasses import replace

    from ui_support import footer

    from heet_tui.ui.widgets.status_line import StatusLine

    backend.current = replace(backend.current, read_only=True)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None and app.read_only)
            await pilot.pause()
            assert "n Submit" not in footer(app) and "q Quit" in footer(app)
            assert "READ-ONLY" in str(app.screen.query_one(StatusLine).render())
            await pilot.press("n")
            await pilot.pause()
            assert backend.posted == [] and len(app.screen_stack) == 1

    run(scenario())


def test_palette_offers_the_four_commands_when_writable(make_app):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            for wanted in ("submit job…", "connect host…", "drain host…", "switch policy…"):
                assert wanted in names
            assert any(n.startswith("submit job ") and n.endswith(".toml") for n in names)

    run(scenario())


def test_palette_submit_posts_the_example_spec(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            commands = {name: callback for name, callback, _ in HeetCommands(app.screen)._commands()}
            commands["submit job small-cnn.toml"]()
            await wait_for(pilot, lambda: backend.posted)
            (intent,) = backend.posted
            assert isinstance(intent, SubmitJob) and intent.spec_path.endswith("examples/jobs/small-cnn.toml")

    run(scenario())


def test_the_demos_palette_offers_no_host_commands(make_app, backend):
    """It offered "drain host…", then refused it once the host was typed: its hosts are simulated."""
    from dataclasses import replace

    from ui_fakes import small_snapshot

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            assert "drain host…" in names and "connect host…" in names
            backend.push(replace(small_snapshot(1), mode="demo"))
            await wait_for(pilot, lambda: app.latest.mode == "demo")
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            assert "drain host…" not in names and "connect host…" not in names and "switch policy…" in names

    run(scenario())


def test_with_no_color_what_needs_the_user_is_reversed_not_red(make_app, backend, monkeypatch):
    """Under NO_COLOR, Textual's monochrome drew the red "failed" count, READ-ONLY and "controller
    stopped" as a grey on the header's grey: the one line saying nothing is live went unseen."""
    from dataclasses import replace

    from ui_fakes import with_job

    from heet_tui.core.job import JobState
    from heet_tui.ui.widgets.status_line import StatusLine

    monkeypatch.setenv("NO_COLOR", "1")
    backend.current = replace(with_job(backend.current, "j3", state=JobState.FAILED), read_only=True)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None and app.read_only)
            await pilot.pause()
            line = app.screen.query_one(StatusLine)._shown
            styles = {line.plain[s.start:s.end]: str(s.style) for s in line.spans}
            assert styles.get("1 failed") == "bold reverse" and styles.get("READ-ONLY") == "bold reverse", styles

    run(scenario())
