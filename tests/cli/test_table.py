"""Command output lines: cut to the terminal, whole to a pipe (cli/table.py)."""

from __future__ import annotations

import pytest

from heet_tui.cli.table import first_line, line_room


def test_a_message_is_cut_to_its_room_and_says_when_there_is_more() -> None:
    assert first_line("short", 10) == "short"
    assert first_line("a long message", 10) == "a long me…"
    assert first_line("two\nlines", 10) == "two …"
    assert first_line("x" * 500, None) == "x" * 500


def test_the_room_is_the_terminals_and_unlimited_in_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # pytest's stdout is captured: not a terminal
    assert line_room(30, 20) is None
    monkeypatch.setenv("COLUMNS", "100")
    assert (line_room(30, 20), line_room(90, 20)) == (70, 20)
