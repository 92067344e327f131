"""A Ctrl-C while the command line loads its commands ends quietly with 130, as one later does."""

from __future__ import annotations

import pytest

import heet_tui.cli.main as cli_main


def test_a_ctrl_c_while_the_commands_load_exits_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture) -> None:
    def interrupted(package: str) -> list:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_discover", interrupted)
    assert cli_main.main(["sim", "--help"]) == 130
    assert capsys.readouterr().err == ""
