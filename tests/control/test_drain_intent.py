"""A drain asked for in the TUI is recorded as such, without naming a key nobody pressed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from heet_tui.control.drains import drain_reasons
from heet_tui.control.intents import IntentHandler
from heet_tui.control.store import Store
from heet_tui.core.intents import DrainHost


def test_a_drain_from_the_tui_is_said_to_come_from_the_tui_not_from_its_d_key(tmp_path: Path) -> None:
    """The palette's "drain host…" posts the same intent as d on the Cluster screen, and its event
    said "(d in the TUI)": a key that was never pressed."""
    store = Store(tmp_path / "state")
    ctl = SimpleNamespace(store=store, hosts=SimpleNamespace(names=lambda: ["b"], path=tmp_path / "hosts.toml"),
                          clock=lambda: 1000.0, opt=SimpleNamespace(read_only=False))
    handler = IntentHandler(ctl)  # type: ignore[arg-type]
    asyncio.run(handler.handle(DrainHost("b", True)))
    asyncio.run(handler.handle(DrainHost("b", False)))
    said = [e.message for e in store.events(limit=10)]
    assert said == ["b drained by hand (in the TUI)", "b back in service by hand (in the TUI)"], said
    assert drain_reasons(store) == {}
