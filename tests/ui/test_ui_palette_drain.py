"""The palette's "drain host…" and "undrain host…": the same question as d on the Cluster screen
before jobs stop, and only the hosts each can act on offered."""

from __future__ import annotations

from dataclasses import replace

from ui_fakes import small_snapshot
from ui_support import SIZE, run, wait_for

from heet_tui.core.intents import DrainHost
from heet_tui.ui.commands import HeetCommands
from heet_tui.ui.dialogs.confirm import ConfirmDialog
from heet_tui.ui.dialogs.prompt import PromptDialog


def _palette(app, name: str) -> None:
    """Run the palette command ``name`` as choosing it would."""
    commands = {label: callback for label, callback, _ in HeetCommands(app.screen)._commands()}
    commands[name]()


async def _answer_prompt(pilot, app, typed: str) -> PromptDialog:
    await wait_for(pilot, lambda: isinstance(app.screen, PromptDialog))
    prompt = app.screen
    await pilot.press(*typed, "enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, PromptDialog))
    return prompt


async def _palette_drain_question(pilot, app, host: str) -> str:
    """The question the palette's "drain host…" asks of ``host``, left open for an answer."""
    _palette(app, "drain host…")
    await _answer_prompt(pilot, app, host)
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
    return app.screen.question


def test_the_palettes_drain_asks_first_as_d_does_where_jobs_run(make_app, backend):
    """It drained at once, unasked: with auto-approve on, a100-1's jobs stopped on the spot."""
    backend.current = replace(small_snapshot(), auto_approve=True)

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            question = await _palette_drain_question(pilot, app, "a100-1")
            assert question.startswith("Drain a100-1? No job starts there, and the 1 running on it (j1) stops "
                                       "at once: auto-approve is on"), question
            assert backend.posted == [], "nothing drained before the answer"
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog))
            await pilot.pause()
            assert backend.posted == []
            await _palette_drain_question(pilot, app, "a100-1")
            await pilot.press("y")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [DrainHost("a100-1", True)]

    run(scenario())


def test_the_palette_and_d_ask_the_same_question(make_app, backend):
    """One question, in one place: the palette's copy of it would drift from d's."""
    from heet_tui.ui.widgets.host_table import HostTable

    asked: list[str] = []

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            table = app.screen.query_one(HostTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            table.select_key("t4-1")
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            asked.append(app.screen.question)
            await pilot.press("n")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog))
            asked.append(await _palette_drain_question(pilot, app, "t4-1"))

    run(scenario())
    by_key, by_palette = asked
    assert by_key == by_palette and "at the next plan you approve" in by_key, asked


def test_the_palettes_drain_of_an_idle_host_needs_no_question(make_app, backend):
    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            _palette(app, "drain host…")
            await _answer_prompt(pilot, app, "a100-2")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [DrainHost("a100-2", True)]
            assert not isinstance(app.screen, ConfirmDialog)

    run(scenario())


def test_the_palette_offers_undrained_hosts_to_drain_and_drained_ones_to_undrain(make_app, backend):
    """It offered t4-1, drained already, for draining, and had no undrain at all (d on the
    Cluster screen was the only way back)."""
    snap = small_snapshot()
    backend.current = replace(snap, hosts=tuple(replace(h, drained=h.name == "t4-1") for h in snap.hosts))

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            assert "undrain host…" in names
            _palette(app, "drain host…")
            prompt = await _answer_prompt(pilot, app, "t4-1")
            assert prompt.suggestions == ("a100-1", "a100-2")
            await wait_for(pilot, lambda: any("t4-1 is drained already" in n.message for n in app._notifications))
            await pilot.pause()
            assert backend.posted == [] and not isinstance(app.screen, ConfirmDialog)
            _palette(app, "undrain host…")
            prompt = await _answer_prompt(pilot, app, "t4-1")
            assert prompt.suggestions == ("t4-1",)
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [DrainHost("t4-1", False)]
            _palette(app, "undrain host…")
            await _answer_prompt(pilot, app, "a100-2")
            await wait_for(pilot, lambda: any("a100-2 is not drained" in n.message for n in app._notifications))
            assert backend.posted == [DrainHost("t4-1", False)]

    run(scenario())


def test_the_demos_palette_offers_no_undrain_either(make_app, backend):
    backend.current = replace(small_snapshot(), mode="demo")

    async def scenario():
        app = make_app("jobs")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            names = [name for name, _, _ in HeetCommands(app.screen)._commands()]
            assert "undrain host…" not in names and "drain host…" not in names

    run(scenario())
