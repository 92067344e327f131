"""Moving a job's checkpoint between hosts that do not share a filesystem.

Hosts with ``shared_fs = true`` read the checkpoint directory in place. When a job moves to
or from a host without one, the controller copies the directory's files (the checkpoint and
its sidecar) from the host whose rank 0 wrote them to the new rank-0 host, over SFTP on the
same SSH settings the cluster layer uses (or as plain files for ``transport = "local"``).

Each file streams from one host to the other through the controller in chunks, reading the
next while the last is written: the copy once landed whole in the login node's temporary
directory and was then sent on, which took twice as long and needed the checkpoint's size in
free space on the login node (a 20 GB checkpoint and a small ``/tmp`` meant a job restarted
from scratch). Files are written under temporary names and renamed only once every one has
arrived, so a reader never sees half a file, nor half a checkpoint: a full disk once let
``checkpoint.json`` (first by name) land without ``checkpoint.pt``, and the job, relaunched there,
trained from step 0 under the older step's claim while its whole checkpoint sat on a host that was up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heet_tui.cluster import ClusterOptions
from heet_tui.config.hosts_file import HostEntry

SKIP_SUFFIXES = (".tmp",)
# the agent's mark of which store owns the directory: each host's agent writes its own (one copied
# from a compromised host failed the job on the next host, "holds another state store's checkpoints")
SKIP_NAMES = (".heet-owner",)
CHUNK = 4 << 20
DEPTH = 4  # chunks in flight between the hosts: memory stays at DEPTH x CHUNK whatever the size


class CopyFailed(RuntimeError):
    """The checkpoint could not be copied; ``str()`` names both hosts and the directory."""


class CopyRefused(CopyFailed):
    """The new host's directory may not receive it (another user's, open to others, not writable,
    or on a disk without room for it): no wait fixes that, and starting without it there would
    train again from step 0."""


class NoRoom(OSError):
    """The new host's disk cannot hold the checkpoint (said with both figures: SFTP's error for a
    full disk is a bare "Failure")."""


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} KB"


def needs_copy(src: HostEntry, dst: HostEntry, src_dir: str, dst_dir: str) -> bool:
    if src.name == dst.name:
        return False
    if src.shared_fs and dst.shared_fs and src_dir == dst_dir:
        return False
    both_local = src.transport == "local" and dst.transport == "local"
    return not (both_local and _local(src_dir) == _local(dst_dir))


def refusal(directory: str, owner: int, group: int, mode: int, my_uid: int, my_gid: int) -> str | None:
    """Why a copy must not land in ``directory`` (the agent's rule for checkpoint dirs, applied
    before any byte is written): a directory another user owns, or may write, received the
    weights and kept them readable after the agent refused it at the next launch."""
    if owner != my_uid:
        return f"checkpoint dir {directory} belongs to uid {owner}, not to you: give the job a checkpoint_dir of its own"
    if mode & 0o002 or (mode & 0o020 and group != my_gid):
        return (f"checkpoint dir {directory} may be written by others (mode {oct(mode & 0o777)}): "
                f"chmod go-w {directory}, or give the job another checkpoint_dir")
    return None


def _local(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _sftp_path(path: str) -> str:
    """SFTP resolves relative paths from the login directory, which is what ``~/`` means."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


class _LocalDir:
    def __init__(self, directory: str) -> None:
        self.path = Path(_local(directory))

    async def files(self) -> list[str]:
        return [name for name, copied in await self.entries() if copied]

    async def entries(self) -> list[tuple[str, bool]]:
        """Each name, and whether it is copied: regular files, and links to one in this directory
        (``latest -> step-100.pt``); not a link elsewhere (to a key, say: what it points at would
        go to another host), nor a subdirectory."""
        if not self.path.is_dir():
            return []
        here, out = self.path.resolve(), []
        for p in sorted(self.path.iterdir(), key=lambda p: p.name):
            if p.name.endswith(SKIP_SUFFIXES) or p.name in SKIP_NAMES:
                continue
            inside = not p.is_symlink() or (p.resolve().parent == here)
            out.append((p.name, inside and p.is_file()))
        return out

    async def stats(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name in await self.files():
            st = (self.path / name).stat()
            out[name] = (st.st_size, int(st.st_mtime))
        return out

    async def chunks(self, name: str) -> AsyncIterator[bytes]:
        with open(self.path / name, "rb") as fh:
            while data := await asyncio.to_thread(fh.read, CHUNK):
                yield data

    async def prepare(self) -> None:
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = self.path.stat()
        if why := refusal(str(self.path), st.st_uid, st.st_gid, st.st_mode, os.getuid(), os.getgid()):
            raise PermissionError(why)

    async def free_bytes(self) -> int | None:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    async def write(self, name: str, chunks: AsyncIterator[bytes]) -> None:
        """Into the name's temporary file; ``commit`` gives it its name."""
        tmp = self.path / f".{name}.copy.tmp"
        tmp.unlink(missing_ok=True)  # a link planted at the name goes, not what it points at
        try:
            # created here, never followed: "wb" wrote through a link to any file the user may write
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                async for data in chunks:
                    await asyncio.to_thread(fh.write, data)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a copy cut short leaves nothing behind
            raise

    async def commit(self, name: str) -> None:
        os.replace(self.path / f".{name}.copy.tmp", self.path / name)

    async def discard(self, name: str) -> None:
        (self.path / f".{name}.copy.tmp").unlink(missing_ok=True)

    async def close(self) -> None:
        pass


class _SftpDir:
    def __init__(self, transport: Any, sftp: Any, directory: str) -> None:
        self.transport, self.sftp, self.path = transport, sftp, _sftp_path(directory)
        self.shown = directory  # as the user wrote it: "~/ckpt/j1", not SFTP's "ckpt/j1"

    @classmethod
    async def open(cls, entry: HostEntry, directory: str, ssh_config: Path | None, options: ClusterOptions) -> _SftpDir:
        from heet_tui.cluster.ssh_transport import SshTransport

        transport = SshTransport(entry, ssh_config, options.known_hosts_fallback(), options.connect_timeout_s,
                                 options.keepalive_s)
        try:
            conn = await transport.connect()
            return cls(transport, await conn.start_sftp_client(), directory)
        except BaseException:
            await transport.close()
            raise

    async def files(self) -> list[str]:
        return [name for name, copied in await self.entries() if copied]

    async def entries(self) -> list[tuple[str, bool]]:
        """As ``_LocalDir.entries``, over SFTP."""
        import asyncssh

        try:
            listing = await self.sftp.listdir(self.path)
        except asyncssh.SFTPNoSuchFile:
            return []
        here, out = None, []
        for n in sorted(n for n in listing if n not in (".", "..", *SKIP_NAMES) and "/" not in n
                        and not n.endswith(SKIP_SUFFIXES)):
            path = f"{self.path}/{n}"
            inside = True
            if await self.sftp.islink(path):
                here = here or await self.sftp.realpath(self.path)
                inside = (await self.sftp.realpath(path)).rsplit("/", 1)[0] == here
            out.append((n, inside and await self.sftp.isfile(path)))
        return out

    async def stats(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name in await self.files():
            attrs = await self.sftp.stat(f"{self.path}/{name}")
            out[name] = (int(attrs.size or 0), int(attrs.mtime or 0))
        return out

    async def chunks(self, name: str) -> AsyncIterator[bytes]:
        async with self.sftp.open(f"{self.path}/{name}", "rb") as fh:
            while data := await fh.read(CHUNK):
                yield data

    async def prepare(self) -> None:
        import asyncssh

        await self.sftp.makedirs(self.path, attrs=asyncssh.SFTPAttrs(permissions=0o700), exist_ok=True)

    async def free_bytes(self) -> int | None:
        """None where the server cannot say (an SFTP server without OpenSSH's statvfs extension)."""
        import asyncssh

        try:
            st = await self.sftp.statvfs(self.path)
        except asyncssh.SFTPError:
            return None
        return int(st.bavail) * int(st.frsize)

    async def write(self, name: str, chunks: AsyncIterator[bytes]) -> None:
        """Into the name's temporary file; ``commit`` gives it its name."""
        import asyncssh

        tmp = f"{self.path}/.{name}.copy.tmp"
        if await self.sftp.lexists(tmp):
            await self.sftp.remove(tmp)  # a link planted at the name: removed, not written through
        try:
            # created by this open (O_EXCL), or it fails; 0600 as the agent's own: the host's umask made it 0644
            async with self.sftp.open(tmp, "xb", attrs=asyncssh.SFTPAttrs(permissions=0o600)) as fh:
                mine, where = await self.sftp.lstat(tmp), await self.sftp.stat(self.path)  # our uid: the new file's
                if why := refusal(self.shown, int(where.uid), int(where.gid), int(where.permissions), int(mine.uid),
                                  int(mine.gid)):
                    raise PermissionError(why)
                async for data in chunks:
                    await fh.write(data)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.sftp.remove(tmp)
            raise

    async def commit(self, name: str) -> None:
        await self.sftp.posix_rename(f"{self.path}/.{name}.copy.tmp", f"{self.path}/{name}")

    async def discard(self, name: str) -> None:
        with contextlib.suppress(Exception):
            await self.sftp.remove(f"{self.path}/.{name}.copy.tmp")

    async def close(self) -> None:
        self.sftp.exit()
        if self.transport is not None:  # None: a session on the agent's connection, which stays
            await self.transport.close()


# the cluster's SFTP session on a host's existing connection, or None (Cluster.open_sftp)
SftpOf = Callable[[str], Awaitable[Any]]


async def _open(entry: HostEntry, directory: str, ssh_config: Path | None,
                options: ClusterOptions, sftp_of: SftpOf | None = None) -> _LocalDir | _SftpDir:
    if entry.transport == "local":
        return _LocalDir(directory)
    if sftp_of is not None and (shared := await sftp_of(entry.name)) is not None:
        return _SftpDir(None, shared, directory)
    return await _SftpDir.open(entry, directory, ssh_config, options)


async def _relay(src: _LocalDir | _SftpDir, dst: _LocalDir | _SftpDir, name: str) -> int:
    """Stream one file: the next chunk is read while the last is written."""
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(DEPTH)
    size = 0

    async def read() -> None:
        try:
            async for data in src.chunks(name):
                await queue.put(data)
            await queue.put(None)
        except Exception as exc:  # noqa: BLE001 - handed to the writer, which raises it
            await queue.put(exc)

    async def received() -> AsyncIterator[bytes]:
        nonlocal size
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            size += len(item)
            yield item

    reader = asyncio.create_task(read())
    try:
        await dst.write(name, received())
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return size


@dataclass(frozen=True, slots=True)
class Copied:
    files: int
    bytes: int
    left_out: tuple[str, ...] = ()  # subdirectories and links elsewhere, said: they were left behind unsaid


@contextlib.asynccontextmanager
async def _sides(ssh_config: Path | None, options: ClusterOptions, sftp_of: SftpOf | None) -> AsyncIterator[Any]:
    """``open(entry, directory)`` for each host a copy or comparison reads; all closed on the way out."""
    opened: list[_LocalDir | _SftpDir] = []

    async def open_side(entry: HostEntry, directory: str) -> _LocalDir | _SftpDir:
        opened.append(await _open(entry, directory, ssh_config, options, sftp_of))
        return opened[-1]

    try:
        yield open_side
    finally:
        for side in opened:
            with contextlib.suppress(Exception):
                await side.close()


async def copy_checkpoint(src: HostEntry, src_dir: str, dst: HostEntry, dst_dir: str,
                          ssh_config: Path | None = None, options: ClusterOptions | None = None,
                          sftp_of: SftpOf | None = None) -> Copied:
    """Copy every file of ``src:src_dir`` to ``dst:dst_dir``; says how many files and bytes were copied."""
    try:
        async with _sides(ssh_config, options or ClusterOptions(), sftp_of) as open_side:
            source = await open_side(src, src_dir)
            entries = await source.entries()
            names = [name for name, copied in entries if copied]
            left_out = tuple(name for name, copied in entries if not copied)
            if not names:
                return Copied(0, 0, left_out)  # nothing checkpointed yet: the job starts from scratch there
            sizes = {name: size for name, (size, _) in (await source.stats()).items() if name in names}
            target = await open_side(dst, dst_dir)
            await target.prepare()
            await _room_for(target, dst, sum(sizes.values()))
            total = 0
            try:
                for name in names:
                    total += await _relay(source, target, name)
                    sizes[name] = -1  # written: its space is taken
                for name in sorted(names, key=lambda n: -max(sizes.get(n, 0), 0)):
                    await target.commit(name)  # the large data first, the small metadata last
            except BaseException:
                left = sum(s for s in sizes.values() if s > 0)
                full = await _full(target, left)
                for name in names:
                    await target.discard(name)
                if full:
                    raise NoRoom(f"{dst.name}'s disk filled up during the copy ({_mb(full[0])} free, {_mb(left)} still "
                                 "to write); nothing of it was kept there") from None
                raise
            return Copied(len(names), total, left_out)
    except Exception as exc:  # noqa: BLE001 - asyncssh, OS and cluster errors all mean "could not copy"
        kind = CopyRefused if isinstance(exc, PermissionError | NoRoom) else CopyFailed
        raise kind(f"copying the checkpoint {src.name}:{src_dir} -> {dst.name}:{dst_dir} failed: {exc}") from None


async def _room_for(target: _LocalDir | _SftpDir, dst: HostEntry, need: int) -> None:
    free = await target.free_bytes()
    if free is not None and free < need:
        raise NoRoom(f"{dst.name} has {_mb(free)} free there and the checkpoint needs {_mb(need)}: free some "
                     "space on it, or give the job another checkpoint_dir")


async def _full(target: _LocalDir | _SftpDir, left: int) -> tuple[int] | None:
    """(free bytes,) when the target's disk lacks room for what was ``left`` to write, the likely
    cause of a failed write; read before the copy's own temporary files go. A fixed 16 MB said
    "filled up" of any failure on a small disk, and of one that another copy's failure had freed."""
    with contextlib.suppress(Exception):
        free = await target.free_bytes()
        if free is not None and free < left:
            return (free,)
    return None


async def sees_same_files(src: HostEntry, dst: HostEntry, directory: str, ssh_config: Path | None = None,
                          options: ClusterOptions | None = None, sftp_of: SftpOf | None = None) -> bool | None:
    """Whether ``dst`` finds in ``directory`` every checkpoint file ``src`` has there, of the same
    size and time; None when one of them cannot be read (then the hosts file is taken at its word).

    ``shared_fs = true`` is the hosts file's default, and hosts that were not one filesystem read
    a directory of the same name each: a job moved by a drain restarted from step 10 on the new
    host while its checkpoint at step 1,043 sat on the old one."""
    try:
        async with _sides(ssh_config, options or ClusterOptions(), sftp_of) as open_side:
            theirs = await (await open_side(src, directory)).stats()
            if not theirs:
                return True  # nothing to find
            ours = await (await open_side(dst, directory)).stats()
            return all(ours.get(name) == stat for name, stat in theirs.items())
    except Exception:  # noqa: BLE001 - asyncssh, OS and cluster errors all mean "cannot tell"
        return None
