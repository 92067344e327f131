"""The address other hosts reach a host at: an SSH-config alias resolves on this machine only,
so a multi-host job's MASTER_ADDR is the config's HostName (control/launch.py)."""

from __future__ import annotations

import asyncio
import sys

from heet_tui.cluster import Cluster, ClusterOptions
from heet_tui.config.hosts_file import load_hosts


def test_an_alias_is_reached_at_its_hostname_and_a_local_host_at_none(tmp_path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host node9\n  HostName 127.0.0.99\n  Port 2299\n")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[defaults]\nssh_config = "{config}"\n\n[[hosts]]\nname = "n9"\naddress = "node9"\n\n'
                     f'[[hosts]]\nname = "here"\ntransport = "local"\npython = "{sys.executable}"\n'
                     f'workdir = "{tmp_path / "w"}"\n')

    async def scenario() -> tuple[str | None, str | None]:
        async with Cluster(load_hosts(hosts), ClusterOptions(connect_timeout_s=1.0, fallback_known_hosts=tmp_path
                                                             / "known_hosts")) as cluster:
            return cluster.reachable_address("n9"), cluster.reachable_address("here")

    assert asyncio.run(scenario()) == ("127.0.0.99", None)
