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


def test_a_config_heet_reads_otherwise_than_ssh_is_said_with_both_readings(lab, capsys):
    """asyncssh runs a `Match exec` command without expanding its %-tokens: ssh gave the host its
    port, heet-tui connected to port 22 ("Connection refused") and said nothing of why."""
    host = lab.add_host("matched")
    flags = lab.root / "flags"
    flags.mkdir()
    (flags / "gpu-m").touch()
    lab.write_ssh_config(lab.user_key, extra=f'Match originalhost gpu-m exec "test -f {flags}/%n"\n'
                                             f"  Port {host.port}\nHost gpu-m\n  HostName {host.address}\n")
    path = lab.hosts_toml([{"name": "m", "address": "gpu-m", "workdir": str(host.workdir)}])
    said = ssh_config_refusals(load_hosts(path))["m"]
    user = lab.ssh_config.read_text().split("User ", 1)[1].split()[0]
    assert (f"ssh(1) reads the SSH config as {user}@{host.address}:{host.port}, heet-tui's SSH library as "
            f"{user}@{host.address}:22") in said, said
    assert main(["hosts", "check", "--hosts", str(path), "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert "does not expand %-tokens in a Match exec command" in row["message"], row

    lab.write_ssh_config(lab.user_key, extra=f"Host gpu-m\n  HostName {host.address}\n  Port {host.port}\n")
    assert ssh_config_refusals(load_hosts(path)) == {}, "read alike: nothing said"


def test_a_key_named_with_tokens_is_checked_as_ssh_expands_it(lab):
    """`IdentityFile ~/.ssh/%r@%h`: ssh -G prints the tokens as they are, so a key others may read
    went unchecked; ssh refused it while heet-tui read the host as ready."""
    host = lab.add_host("tokens")
    user = lab.ssh_config.read_text().split("User ", 1)[1].split()[0]
    key = lab.root / f"{user}@{host.address}"
    key.write_bytes(lab.user_key.read_bytes())
    key.chmod(0o600)
    lab.write_ssh_config(lab.root / "%r@%h")
    path = lab.hosts_toml([lab.entry_for(host)])
    assert ssh_config_refusals(load_hosts(path)) == {}
    key.chmod(0o644)
    said = ssh_config_refusals(load_hosts(path))["tokens"]
    assert f"the key file {key} (mode 644) may be read by others" in said, said


def test_a_numeric_jump_host_and_a_config_asyncssh_cannot_read_raise_no_false_alarm(lab, capsys):
    """ssh -G writes a numeric jump host in brackets: `ProxyJump 127.0.0.2:60985` read as a
    difference (and the check failed); a Match line asyncssh cannot parse was a traceback."""
    gate, inside = lab.add_host("gate"), lab.add_host("inside")
    lab.write_ssh_config(lab.user_key, extra=f"Host numjump\n  HostName {inside.address}\n  Port {inside.port}\n"
                                             f"  ProxyJump root@{gate.address}:{gate.port}\n")
    path = lab.hosts_toml([{"name": "n", "address": "numjump", "workdir": str(inside.workdir)}])
    assert ssh_config_refusals(load_hosts(path)) == {}
    lab.write_ssh_config(lab.user_key, extra=f'Match exec "test %h = {gate.address}"\n  Port {gate.port}\n')
    path = lab.hosts_toml([lab.entry_for(gate)])
    assert ssh_config_refusals(load_hosts(path)) == {}, "the host's own check says what asyncssh cannot read"
    main(["hosts", "check", "--hosts", str(path)])
    assert "Traceback" not in capsys.readouterr().err
