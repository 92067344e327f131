"""Which port and user a host is reached at: the hosts file's when it sets them, else the SSH
config's, as ``ssh alias`` would (cluster/ssh_settings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from heet_tui.cluster.ssh_settings import target_for
from heet_tui.config.hosts_file import parse_hosts_text


@pytest.mark.parametrize(("hosts_toml", "port"), [
    ('[[hosts]]\nname = "n"\naddress = "node9"\n', 2299),
    ('[[hosts]]\nname = "n"\naddress = "node9"\nport = 22\n', 22),  # was taken for "not set": 2299
    ('[defaults]\nport = 22\n\n[[hosts]]\nname = "n"\naddress = "node9"\n', 22),
    ('[defaults]\nport = 2200\n\n[[hosts]]\nname = "n"\naddress = "node9"\nport = 2201\n', 2201),
    ('[[hosts]]\nname = "n"\naddress = "plain"\n', 22),
])
def test_a_port_the_hosts_file_sets_wins_and_one_it_leaves_out_is_the_ssh_configs(
        tmp_path: Path, hosts_toml: str, port: int) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host node9\n  HostName 127.0.0.99\n  Port 2299\n")
    entry = parse_hosts_text(hosts_toml, tmp_path / "hosts.toml").hosts[0]
    target = target_for(entry, config, tmp_path / "known_hosts")
    assert target.port == port
    assert target.describe().endswith(f":{port}")


def test_the_configs_connect_timeout_is_kept_shorter_or_longer(tmp_path: Path) -> None:
    """A ConnectTimeout of 3 s took 20 s to say a host did not answer, as ssh(1) does in 3; one of
    60 s (a slow link's: logins over a 2 s round trip took 25 s) was cut to 15, and no host there
    ever connected."""
    from heet_tui.cluster.ssh_settings import connect_kwargs

    config = tmp_path / "ssh_config"
    config.write_text("Host quick\n  ConnectTimeout 3\n\nHost slow\n  ConnectTimeout 60\n")
    (tmp_path / "known_hosts").write_text("")
    for alias, expected in (("quick", 3.0), ("slow", 60.0), ("plain", 15.0)):
        entry = parse_hosts_text(f'[[hosts]]\nname = "n"\naddress = "{alias}"\n', tmp_path / "hosts.toml").hosts[0]
        assert connect_kwargs(target_for(entry, config, tmp_path / "known_hosts"), 15.0)["connect_timeout"] == expected


def test_identity_agent_none_and_the_environments_agent_are_read_as_ssh_reads_them(tmp_path: Path, monkeypatch) -> None:
    """`IdentityAgent none` read as no setting (the hint then named $SSH_AUTH_SOCK's agent), and
    `IdentityAgent SSH_AUTH_SOCK` as a file of that name: ssh logged in, heet-tui was refused."""
    from heet_tui.cluster.ssh_settings import connect_kwargs

    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("LAB", str(tmp_path))
    config = tmp_path / "ssh_config"
    config.write_text("Host off\n  IdentityAgent none\n\nHost env\n  IdentityAgent SSH_AUTH_SOCK\n\n"
                      "Host var\n  IdentityAgent ${LAB}/other.sock\n")
    (tmp_path / "known_hosts").write_text("")

    def target(alias: str):
        entry = parse_hosts_text(f'[[hosts]]\nname = "n"\naddress = "{alias}"\n', tmp_path / "hosts.toml").hosts[0]
        return target_for(entry, config, tmp_path / "known_hosts")

    assert target("off").identity_agent == "none" and target("plain").identity_agent is None
    assert "agent_path" not in connect_kwargs(target("off"), 15.0), "asyncssh reads none itself"
    assert connect_kwargs(target("env"), 15.0)["agent_path"] == str(tmp_path / "agent.sock")
    assert target("var").identity_agent == str(tmp_path / "other.sock"), "asyncssh expands ${VAR} itself"
