"""A refused login says which keys were offered, as ssh -v would have shown."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from heet_tui.cluster.auth_hint import keys_offered


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def test_without_identity_file_the_default_keys_that_exist_are_named(home: Path) -> None:
    (home / ".ssh" / "id_rsa").write_text("key")
    said = keys_offered((), False)
    assert said.startswith("it offered ~/.ssh/id_rsa (no IdentityFile set) and no ssh-agent ($SSH_AUTH_SOCK is "
                           "not set)"), said
    assert "id_ed25519" not in said


def test_no_key_at_all_is_said(home: Path) -> None:
    assert keys_offered((), False).startswith("it offered no key (no IdentityFile set, none in ~/.ssh)")


def test_an_identity_file_that_does_not_exist_is_named(home: Path) -> None:
    said = keys_offered((home / ".ssh" / "id_lab",), False)
    assert said.startswith("it offered no key (~/.ssh/id_lab, named by IdentityFile, does not exist)"), said


def test_the_agent_counts_unless_identities_only(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock_path = home / "agent.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock_path))
        (home / ".ssh" / "id_lab").write_text("key")
        assert " and the keys of the ssh-agent at $SSH_AUTH_SOCK (`ssh-add -l` lists them);" in keys_offered(
            (home / ".ssh" / "id_lab",), False)
        assert " and no other key of the ssh-agent ($SSH_AUTH_SOCK; IdentitiesOnly);" in keys_offered(
            (home / ".ssh" / "id_lab",), True)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(home / "gone.sock"))
    assert "no ssh-agent ($SSH_AUTH_SOCK is gone)" in keys_offered((), False)


def test_the_agent_the_config_names_is_the_one_said(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With IdentityAgent in the SSH config, an empty agent read "no ssh-agent ($SSH_AUTH_SOCK is
    not set)" although the logins had asked it."""
    sock_path = home / ".ssh" / "agent.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        said = keys_offered((), False, "~/.ssh/agent.sock")
        assert " and the keys of the ssh-agent at IdentityAgent ~/.ssh/agent.sock (`ssh-add -l` lists them)" in said
    sock_path.unlink()
    assert "no ssh-agent (IdentityAgent ~/.ssh/agent.sock is gone)" in keys_offered((), False, "~/.ssh/agent.sock")
    assert "no ssh-agent (IdentityAgent none)" in keys_offered((), False, "none")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(home / "gone.sock"))
    assert "no ssh-agent ($SSH_AUTH_SOCK is gone)" in keys_offered((), False, "SSH_AUTH_SOCK")
