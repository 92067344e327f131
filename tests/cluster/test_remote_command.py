"""Remote command lines are quoted: hostile hosts-file values stay literal in a real shell."""

from __future__ import annotations

import subprocess

import pytest

from heet_tui.cluster.remote_command import (
    NEED_AGENT,
    UnsafeValue,
    check_python,
    check_workdir,
    start_agent,
    upload_with_cat,
)

NAME = "heet-agent-0123456789abcdef.pyz"


def test_hostile_workdir_stays_literal(tmp_path):
    workdir = str(tmp_path / "it's $(touch PWNED) `touch PWNED2`; dir")
    out = subprocess.run(["sh", "-c", start_agent("python3", workdir, NAME, "h1")], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == NEED_AGENT
    assert (tmp_path / "it's $(touch PWNED) `touch PWNED2`; dir").is_dir()
    assert not list(tmp_path.rglob("PWNED*"))


def test_tilde_workdir_expands_to_home_and_upload_is_atomic(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(["sh", "-c", upload_with_cat("~/.heet dir", NAME)], input=b"payload", env=env, check=True)
    assert (home / ".heet dir" / NAME).read_bytes() == b"payload"
    assert not list((home / ".heet dir").glob("*.tmp.*"))


def test_values_that_cannot_be_commands_are_refused():
    with pytest.raises(UnsafeValue, match='host "h": python'):
        check_python("h", "python3; reboot")
    with pytest.raises(UnsafeValue):
        check_python("h", "-c")
    with pytest.raises(UnsafeValue):
        check_workdir("h", "work\ndir")
    with pytest.raises(UnsafeValue):
        start_agent("python3", "/w", "../../evil.pyz", "h")
