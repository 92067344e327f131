"""An ssh_config that is a device or a pipe (or Includes one): /dev/zero read until memory ran out,
a named pipe hung `hosts check`, the TUI and `run` with no word."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.capped import fifo_in, run_capped


@pytest.mark.parametrize("device", ["/dev/zero", "fifo"])
def test_an_ssh_config_that_is_not_a_file_is_refused(device: str, tmp_path: Path) -> None:
    """asyncssh reads the config again after this check, so a pipe is refused as a device is."""
    bad = str(fifo_in(tmp_path)) if device == "fifo" else device
    include = tmp_path / "ssh_config"
    include.write_text(f"Include {bad}\nHost *\n  User nobody\n")
    include.chmod(0o600)
    for config in (bad, str(include)):
        hosts = tmp_path / "hosts.toml"
        hosts.write_text(f'[defaults]\nssh_config = "{config}"\n\n[[hosts]]\nname = "a"\naddress = "127.0.0.1"\n'
                         'port = 1\n')
        done = run_capped("hosts", "check", "--hosts", str(hosts), "--state", str(tmp_path / "state"))
        said = done.stdout + done.stderr
        assert f"ssh_config {bad}: not a regular file (a pipe or device?)" in said, said
        assert "Traceback" not in done.stderr


def test_dev_null_as_the_ssh_config_is_no_config(tmp_path: Path) -> None:
    """`ssh -F /dev/null`: it was refused as a file every user can write."""
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[defaults]\nssh_config = "/dev/null"\n\n[[hosts]]\nname = "a"\naddress = "127.0.0.1"\nport = 1\n')
    done = run_capped("hosts", "check", "--hosts", str(hosts), "--state", str(tmp_path / "state"))
    said = done.stdout + done.stderr
    assert "ssh_config" not in said and "Traceback" not in said, said
    assert "a" in said and done.returncode == 1, said  # port 1 refuses the connection: the host is out
