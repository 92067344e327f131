"""Moving a job's checkpoint between hosts that do not share a filesystem.

Hosts with ``shared_fs = true`` read the checkpoint directory in place. When a job moves to
or from a host without one, the controller copies the directory's files (the checkpoint and
its sidecar) from the host whose rank 0 wrote them to the new rank-0 host, over SFTP on the
same SSH settings the cluster layer uses (or as plain files for ``transport = "local"``).
Files are written under a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from heet_tui.cluster import ClusterOptions
from heet_tui.config.hosts_file import HostEntry

SKIP_SUFFIXES = (".tmp",)


class CopyFailed(RuntimeError):
    """The checkpoint could not be copied; ``str()`` names both hosts and the directory."""


def needs_copy(src: HostEntry, dst: HostEntry, src_dir: str, dst_dir: str) -> bool:
    if src.name == dst.name:
        return False
    if src.shared_fs and dst.shared_fs and src_dir == dst_dir:
        return False
    both_local = src.transport == "local" and dst.transport == "local"
    return not (both_local and _local(src_dir) == _local(dst_dir))


def _local(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _sftp_path(path: str) -> str:
    """SFTP resolves relative paths from the login directory, which is what ``~/`` means."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


async def _connect(entry: HostEntry, ssh_config: Path | None, options: ClusterOptions):
    from heet_tui.cluster.ssh_transport import SshTransport

    transport = SshTransport(entry, ssh_config, options.known_hosts_fallback(), options.connect_timeout_s,
                             options.keepalive_s)
    conn = await transport.connect()
    return transport, conn


async def _fetch(entry: HostEntry, directory: str, into: Path, ssh_config: Path | None,
                 options: ClusterOptions) -> list[str]:
    if entry.transport == "local":
        src = Path(_local(directory))
        names = [p.name for p in src.iterdir() if p.is_file() and not p.name.endswith(SKIP_SUFFIXES)]
        for name in names:
            shutil.copy2(src / name, into / name)
        return names
    import asyncssh

    transport, conn = await _connect(entry, ssh_config, options)
    try:
        async with conn.start_sftp_client() as sftp:
            remote = _sftp_path(directory)
            try:
                listing = await sftp.listdir(remote)
            except asyncssh.SFTPNoSuchFile:
                return []
            names = [n for n in listing
                     if n not in (".", "..") and not n.endswith(SKIP_SUFFIXES) and await sftp.isfile(f"{remote}/{n}")]
            for name in names:
                await sftp.get(f"{remote}/{name}", str(into / name))
        return names
    finally:
        await transport.close()


async def _push(entry: HostEntry, directory: str, source: Path, names: list[str], ssh_config: Path | None,
                options: ClusterOptions) -> None:
    if entry.transport == "local":
        dst = Path(_local(directory))
        dst.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy2(source / name, dst / f".{name}.copy.tmp")
            os.replace(dst / f".{name}.copy.tmp", dst / name)
        return
    transport, conn = await _connect(entry, ssh_config, options)
    try:
        async with conn.start_sftp_client() as sftp:
            remote = _sftp_path(directory)
            await sftp.makedirs(remote, exist_ok=True)
            for name in names:
                tmp = f"{remote}/.{name}.copy.tmp"
                await sftp.put(str(source / name), tmp)
                await sftp.posix_rename(tmp, f"{remote}/{name}")
    finally:
        await transport.close()


@dataclass(frozen=True, slots=True)
class Copied:
    files: int
    bytes: int


async def copy_checkpoint(src: HostEntry, src_dir: str, dst: HostEntry, dst_dir: str,
                          ssh_config: Path | None = None, options: ClusterOptions | None = None) -> Copied:
    """Copy every file of ``src:src_dir`` to ``dst:dst_dir``; says how many files and bytes were copied."""
    options = options or ClusterOptions()
    with tempfile.TemporaryDirectory(prefix="heet-ckpt-") as tmp:
        try:
            names = await _fetch(src, src_dir, Path(tmp), ssh_config, options)
            if names:
                await _push(dst, dst_dir, Path(tmp), names, ssh_config, options)
        except FileNotFoundError:
            return Copied(0, 0)  # nothing checkpointed yet: the job starts from scratch there
        except Exception as exc:  # noqa: BLE001 - asyncssh, OS and cluster errors all mean "could not copy"
            raise CopyFailed(f"copying the checkpoint {src.name}:{src_dir} -> {dst.name}:{dst_dir} failed: "
                             f"{exc}") from None
        return Copied(len(names), sum((Path(tmp) / n).stat().st_size for n in names))
