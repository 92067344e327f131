"""Copying a checkpoint between hosts without a shared filesystem: local files and real SFTP over sshd."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.sshd import SshLab

from heet_tui.cluster import ClusterOptions
from heet_tui.config.hosts_file import HostEntry, load_hosts
from heet_tui.control.checkpoint_copy import CopyFailed, copy_checkpoint, needs_copy


def test_needs_copy_only_across_filesystems() -> None:
    a = HostEntry("a", "10.0.0.1")
    b = HostEntry("b", "10.0.0.2")
    private = HostEntry("c", "10.0.0.3", shared_fs=False)
    assert not needs_copy(a, b, "/shared/ck", "/shared/ck")
    assert needs_copy(a, private, "/shared/ck", "/shared/ck")
    assert needs_copy(a, b, "/wa/ck", "/wb/ck")
    assert not needs_copy(a, a, "/x", "/y")


def test_copy_over_sftp_between_two_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    lab = SshLab(tmp_path / "lab")
    try:
        servers = [lab.add_host(n) for n in ("src", "dst")]
        hosts = load_hosts(lab.hosts_toml([lab.entry_for(s, shared_fs=False) for s in servers]))
        local = HostEntry("here", "localhost", transport="local")
        origin = tmp_path / "origin"
        origin.mkdir()
        (origin / "checkpoint.pt").write_bytes(bytes(range(256)) * 400)
        (origin / "checkpoint.json").write_text('{"step": 40, "generation": 2}')
        (origin / ".checkpoint.pt.123.tmp").write_text("half-written")
        on_src, on_dst = tmp_path / "on-src" / "ck", tmp_path / "on-dst" / "deep" / "ck"
        opts = ClusterOptions(connect_timeout_s=10.0)

        async def scenario() -> tuple[int, int]:
            first = await copy_checkpoint(local, str(origin), hosts.host("src"), str(on_src), hosts.ssh_config, opts)
            second = await copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(on_dst),
                                           hosts.ssh_config, opts)
            return first, second

        assert asyncio.run(scenario()) == (2, 2), "the half-written temp file is not copied"
        assert (on_dst / "checkpoint.pt").read_bytes() == (origin / "checkpoint.pt").read_bytes()
        assert (on_dst / "checkpoint.json").read_text() == '{"step": 40, "generation": 2}'
        assert asyncio.run(copy_checkpoint(hosts.host("src"), str(tmp_path / "none"), hosts.host("dst"),
                                           str(on_dst), hosts.ssh_config, opts)) == 0, "nothing to copy yet"
        lab.server("src").kill()
        with pytest.raises(CopyFailed, match="src"):
            asyncio.run(copy_checkpoint(hosts.host("src"), str(on_src), hosts.host("dst"), str(on_dst),
                                        hosts.ssh_config, opts))
    finally:
        lab.close()
