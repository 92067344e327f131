"""The Jobs screen's submit prompt: n asks for a job file, Tab completes its path as a shell does."""

from __future__ import annotations

from ui_support import SIZE, run, wait_for


async def open_submit(pilot, app) -> None:
    """n on the Jobs screen, once the first snapshot is in: the path prompt."""
    from heet_tui.ui.dialogs.prompt import PromptDialog

    await wait_for(pilot, lambda: app.latest is not None)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))


def test_submit_then_enter_in_the_palette_asks_for_a_path_and_submits_nothing(make_app, backend):
    # The example jobs came first: "submit" + Enter submitted small-cnn at once.
    from heet_tui.ui.dialogs.prompt import PromptDialog

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.press("ctrl+p")
            await pilot.pause()
            for key in "submit":
                await pilot.press(key)
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
            assert backend.posted == []

    run(scenario())


def test_n_on_the_jobs_screen_asks_for_a_spec_and_submits_it(make_app, backend, tmp_path, monkeypatch):
    """Submitting took ctrl+p, "submit job", then the path: n asks for the path at once. A
    relative path is this TUI's: the controller it is attached to may run in another directory."""
    from heet_tui.core.intents import SubmitJob

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await open_submit(pilot, app)
            await pilot.press(*str(tmp_path / "sweep"), "enter")
            await wait_for(pilot, lambda: backend.posted == [SubmitJob(str(tmp_path / "sweep"))])
            (tmp_path / "sub").mkdir()
            monkeypatch.chdir(tmp_path / "sub")
            await open_submit(pilot, app)
            await pilot.press(*"../jobs/a.toml", "enter")
            await wait_for(pilot, lambda: backend.posted[1:] == [SubmitJob(str(tmp_path / "jobs" / "a.toml"))])

    run(scenario())


def test_tab_in_the_submit_prompt_completes_a_path_as_a_shell_does(make_app, backend, tmp_path):
    """Tab showed the completion but did not take it, and only the bundled examples were ever
    offered: Enter then submitted the half-typed path ("sm: file not found")."""
    from textual.widgets import Input, Label

    from heet_tui.core.intents import SubmitJob

    (tmp_path / "jobs" / "sweep").mkdir(parents=True)
    for name in ("small.toml", "notes.txt"):
        (tmp_path / "jobs" / name).write_text("")

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await open_submit(pilot, app)
            box, hint = app.screen.query_one(Input), app.screen.query_one("#hint", Label)
            await pilot.press(*f"{tmp_path}/jo")
            await wait_for(pilot, lambda: "jobs/" in str(hint.render()))
            await pilot.press("tab")
            await wait_for(pilot, lambda: box.value == f"{tmp_path}/jobs/")
            await wait_for(pilot, lambda: f"{tmp_path}/jobs/small.toml, {tmp_path}/jobs/sweep/" in str(hint.render()))
            assert "notes.txt" not in str(hint.render()), "job files and directories only"
            await pilot.press("s", "m")
            await wait_for(pilot, lambda: str(hint.render()) == f"→ completes (tab): {tmp_path}/jobs/small.toml")
            await pilot.press("tab", "enter")
            await wait_for(pilot, lambda: backend.posted == [SubmitJob(str(tmp_path / "jobs" / "small.toml"))])

    run(scenario())


def test_a_path_completes_from_home_and_keeps_the_tilde(tmp_path, monkeypatch):
    from heet_tui.ui.path_completion import path_matches

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "a.toml").write_text("")
    (tmp_path / ".hidden").mkdir()
    assert path_matches("~/e") == ["~/exp/"]
    assert path_matches("~/exp/") == ["~/exp/a.toml"]
    assert path_matches("~/") == ["~/exp/"], "dot entries only when a dot is typed"
    assert path_matches("~/exp/*") == [] and path_matches("/no/such/dir/x") == []
    monkeypatch.chdir(tmp_path)
    assert path_matches("ex", ["examples/jobs/a.toml", "other"]) == ["examples/jobs/a.toml", "exp/"], \
        "the choices first, then what the directory holds"
