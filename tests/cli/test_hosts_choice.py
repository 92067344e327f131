"""Without --hosts, every command about a state reads the hosts file its controller last ran on.

``status --state lab`` listed the lab's hosts while ``run --state lab`` started on the default file
(the lab's jobs then ran there), and ``hosts list/add --state lab`` showed and edited a file that
state never used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import bundled_config
from heet_tui.control.hosts_choice import LAST_USED, chosen_hosts_path
from heet_tui.control.store import Store


def _hosts(path: Path, name: str) -> Path:
    path.write_text(f'[[hosts]]\nname = "{name}"\ntransport = "local"\nemulate = {{ gpu_type = "T4", count = 1 }}\n')
    return path


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state whose controller last ran on lab.toml; the user's default file is another."""
    monkeypatch.delenv("HEET_HOSTS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "heet-tui").mkdir(parents=True)
    _hosts(tmp_path / "config" / "heet-tui" / "hosts.toml", "default-box")
    Store(tmp_path / "state").set_setting("hosts_path", str(_hosts(tmp_path / "lab.toml", "lab-box")))
    return tmp_path


def _names(*args: str, env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "hosts", "list", *args], capture_output=True,
                         text=True, timeout=60, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return [line.split()[0] for line in out.stdout.splitlines()[2:]]  # under the file name and the header


def test_the_state_s_own_file_comes_after_an_explicit_one(lab: Path) -> None:
    state = ["--state", str(lab / "state")]
    assert _names(*state) == ["lab-box"]
    assert _names(*state, "--hosts", str(lab / "config" / "heet-tui" / "hosts.toml")) == ["default-box"]
    assert _names(*state, env={"HEET_HOSTS": str(lab / "config" / "heet-tui" / "hosts.toml")}) == ["default-box"]
    assert _names("--state", str(lab / "fresh")) == ["default-box"], "no state there: the default file"
    assert chosen_hosts_path(None, lab / "state") == (lab / "lab.toml", LAST_USED)
    assert chosen_hosts_path(str(lab / "lab.toml"), lab / "state") == (lab / "lab.toml", ""), "given: no remark"


def test_a_bundled_last_file_gives_way_to_the_default(lab: Path) -> None:
    """The bundled file is what a first run used before the user had a file of their own."""
    store = Store(lab / "state")
    store.set_setting("hosts_path", str(bundled_config("local.toml")))
    assert chosen_hosts_path(None, lab / "state") == (lab / "config" / "heet-tui" / "hosts.toml", "")


def test_a_vanished_last_file_is_an_error_not_the_default(lab: Path) -> None:
    """A hosts file on NFS away for a moment when cron ran `run --state lab`: every command took the
    default file instead, unsaid, `run` moved the lab's queue onto it, and made it the file the
    state remembered, so the lab's file was not used again once it was back."""
    (lab / "lab.toml").rename(lab / "away.toml")
    with pytest.raises(ConfigError, match=r"lab.toml: not found \(looked for .*\): it is the hosts file .* last ran on; restore it"):
        chosen_hosts_path(None, lab / "state")
    assert chosen_hosts_path(str(lab / "away.toml"), lab / "state") == (lab / "away.toml", ""), "given: it is used"
    for argv in (["hosts", "list"], ["run", "--until-idle", "--interval", "0.2"], ["status"]):
        out = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", *argv, "--state", str(lab / "state")],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(lab)})
        assert out.returncode == 2 and f"lab.toml: not found (looked for {lab / 'lab.toml'})" in out.stderr, \
            (argv, out.stderr)
        assert "default-box" not in out.stdout
    (lab / "away.toml").rename(lab / "lab.toml")
    assert _names("--state", str(lab / "state")) == ["lab-box"], "the state still remembers its own file"


def test_run_starts_on_the_state_s_file_and_says_why(lab: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "run", "--until-idle", "--state",
                          str(lab / "state"), "--interval", "0.2"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(lab)})
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"controller running: 1 host(s) from {lab / 'lab.toml'} ({LAST_USED})"), out.stdout


def test_drain_finds_a_host_added_to_the_copy_of_the_bundled_file(lab: Path) -> None:
    """The TUI ran on the bundled file; `hosts add gpu-a` copied it to the user's file (which the
    running controller follows), and `hosts drain gpu-a` then looked in the bundled file:
    "no host named gpu-a (hosts: local-a100, local-t4)"."""
    from heet_tui.cli.main import main
    from heet_tui.control.drains import drained_hosts

    Store(lab / "state").set_setting("hosts_path", str(bundled_config("local.toml")))
    _hosts(lab / "config" / "heet-tui" / "hosts.toml", "gpu-a")  # the copy, with the host added
    assert main(["hosts", "drain", "gpu-a", "--state", str(lab / "state")]) == 0
    assert drained_hosts(Store(lab / "state")) == {"gpu-a"}
