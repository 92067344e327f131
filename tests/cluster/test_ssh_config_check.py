"""`hosts check` says when ssh(1) refuses the SSH config heet-tui connects with (against a real
sshd, the `lab` fixture): asyncssh skipped an unknown directive such as `Portt 22`, and the
host read ready while `ssh` itself refused to start."""

from __future__ import annotations

import json
import shutil

import pytest

from heet_tui.cli.main import main
from heet_tui.cluster.ssh_config_check import ssh_config_refusals
from heet_tui.config.hosts_file import load_hosts

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="ssh(1) checks the config")


def test_a_directive_ssh_does_not_know_is_named_with_its_file_and_line(lab, capsys):
    host = lab.add_host("typo")
    lab.write_ssh_config(lab.user_key, extra="Host nowhere\n  Portt 22\n")
    path = lab.hosts_toml([lab.entry_for(host, emulate={"gpu_type": "T4", "count": 1, "speed": 1.0})])
    refusal = ssh_config_refusals(load_hosts(path))["typo"]
    assert f"{lab.ssh_config}: line 2: Bad configuration option: portt" in refusal, refusal
    assert main(["hosts", "check", "--hosts", str(path), "--json"]) == 1, "ssh itself would not start: the check fails"
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "ready" and any("ssh(1) refuses the SSH config" in w for w in row["warnings"]), row

    lab.write_ssh_config(lab.user_key)  # fixed: nothing said
    assert ssh_config_refusals(load_hosts(path)) == {}
    assert main(["hosts", "check", "--hosts", str(path), "--json"]) == 0


def test_a_key_file_others_may_read_is_named_as_ssh_refuses_it(lab):
    host = lab.add_host("openkey")
    path = lab.hosts_toml([lab.entry_for(host)])
    assert ssh_config_refusals(load_hosts(path)) == {}, "the lab's key is 0600"
    lab.user_key.chmod(0o644)
    said = ssh_config_refusals(load_hosts(path))["openkey"]
    assert f"the key file {lab.user_key} (mode 644) may be read by others: ssh(1) refuses such a key" in said, said
