"""The SSH transport: connect with asyncssh (config, jumps, keepalives, verified host keys),
deploy the agent over SFTP (or ``cat >`` without SFTP) under its content-hash name, start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import getpass
import secrets
from pathlib import Path
from typing import Any

import asyncssh

from heet_tui.cluster.agent_bundle import AgentBundle
from heet_tui.cluster.auth_hint import keys_offered
from heet_tui.cluster.channel import AgentChannel
from heet_tui.cluster.errors import AgentFailure, AuthFailed, ConnectFailure, HostKeyUnknown, Unreachable
from heet_tui.cluster.login_output import after_login, first_command_line
from heet_tui.cluster.remote_command import (
    check_python,
    check_workdir,
    in_sh,
    sftp_path,
    start_agent,
    upload_with_cat,
)
from heet_tui.cluster.ssh_settings import (
    SshConfigError,
    SshTarget,
    connect_kwargs,
    key_revoked,
    parse_jump,
    resolve_target,
    revoked_message,
    target_for,
)
from heet_tui.cluster.transport import PushbackReader, is_need_agent
from heet_tui.config.hosts_file import HostEntry

MAX_JUMP_DEPTH = 8  # jump hosts behind jump hosts; more is a loop in ~/.ssh/config


def failure_reason(exc: BaseException) -> str:
    """A short human reason for a connection-level exception."""
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out (no answer: is the host up, and its sshd not hung?)"
    if isinstance(exc, OSError):
        known = {errno.ECONNREFUSED: "connection refused (is sshd listening on that port?)",
                 errno.EHOSTUNREACH: "no route to host", errno.ENETUNREACH: "network unreachable",
                 errno.ETIMEDOUT: "timed out"}
        return known.get(exc.errno or 0) or exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


async def server_key(target: SshTarget, tunnel: Any, timeout_s: float) -> asyncssh.SSHKey | None:
    """The key the server presents, read without verifying it (to show it for approval)."""
    return await asyncio.wait_for(asyncssh.get_server_host_key(
        target.alias, target.port, tunnel=tunnel, config=[str(p) for p in target.config_paths]), timeout_s)


async def _fingerprint(target: SshTarget, tunnel: Any, timeout_s: float) -> tuple[str, bool, bool]:
    """The server's host key fingerprint, whether known_hosts had a different key for it, and
    whether it marks this one revoked."""
    key = await server_key(target, tunnel, timeout_s)
    fingerprint = key.get_fingerprint("sha256") if key is not None else ""
    changed = False
    with contextlib.suppress(Exception):
        listed = target.known_keys(connect_kwargs(target, timeout_s)["known_hosts"])[0]
        # "changed" only for another key: the key just trusted was called changed, round and round
        changed = bool(listed) and not any(k.public_data == key.public_data for k in listed)
    return fingerprint, changed, key is not None and key_revoked(target, key)


async def open_connection(target: SshTarget, tunnel: Any, timeout_s: float, label: str,
                          name: str = "") -> asyncssh.SSHClientConnection:
    """asyncssh.connect with every failure mapped to the host state it means."""
    # a longer ConnectTimeout in the SSH config is a slow link's: logins over a 2 s round trip took
    # 25 s, and at 15 s every host read "timed out (no answer: is the host up?)" for good
    timeout_s = max(timeout_s, target.connect_timeout_s or 0.0)
    try:
        return await asyncio.wait_for(asyncssh.connect(tunnel=tunnel, **connect_kwargs(target, timeout_s)),
                                      timeout_s)
    except TimeoutError:
        waited = target.connect_timeout_s or timeout_s  # the config's, shorter or longer, is what fires
        raise Unreachable(f"{label}cannot connect to {target.describe()}: timed out after {waited:g} s (no "
                          "answer: is the host up, and its sshd not hung? Over a slow link the login may "
                          "need longer: ConnectTimeout in the SSH config allows more)") from None
    except asyncssh.HostKeyNotVerifiable:
        try:
            fingerprint, changed, revoked = await _fingerprint(target, tunnel, timeout_s)
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            raise HostKeyUnknown(f"{label}host key of {target.describe()} not verifiable and could not be read "
                                 f"({failure_reason(exc)})") from None
        if revoked:  # "changed" sent users round a loop of trusting a key already trusted
            raise Unreachable(label + revoked_message(target, fingerprint)) from None
        if changed:
            message = (f"{label}HOST KEY CHANGED for {target.known_hosts_pattern}: it now presents {fingerprint}, "
                       f"which differs from {target.trust_file}; check with the host's admin before trusting it")
        else:
            message = (f"{label}unknown host key {fingerprint} for {target.known_hosts_pattern}; "
                       f"verify it, then trust it (heet-tui hosts trust {name or '<host>'})")
        raise HostKeyUnknown(message, fingerprint, changed) from None
    except asyncssh.PermissionDenied as exc:
        who = target.user or getpass.getuser()
        raise AuthFailed(f"{label}{who}@{target.hostname}:{target.port}: permission denied ({failure_reason(exc)}); "
                         f"{keys_offered(target.identity_files, target.identities_only, target.identity_agent)}; the host's "
                         f"~/.ssh/authorized_keys for {who} must hold one of them") from None
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        if exc.filename is None:  # not a file of this machine's (an OS error of the socket)
            raise Unreachable(f"{label}cannot connect to {target.describe()}: {failure_reason(exc)}") from None
        # it said "cannot connect to root@127.0.0.4:54501: No such file or directory", naming no file
        why = "does not exist" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror})"
        raise AuthFailed(f"{label}{target.describe()}: the key file {exc.filename} {why}; it is an IdentityFile "
                         f"of your ssh config ({', '.join(map(str, target.config_paths)) or '~/.ssh/config'}) or "
                         "of its defaults: fix the path there") from None
    except (OSError, asyncssh.Error) as exc:
        raise Unreachable(f"{label}cannot connect to {target.describe()}: {failure_reason(exc)}") from None


class SshTransport:
    def __init__(self, entry: HostEntry, ssh_config: Path | None, fallback_known_hosts: Path,
                 connect_timeout_s: float = 15.0, keepalive_s: float = 5.0, check_only: bool = False,
                 trust_option: str = "") -> None:
        self.entry = entry
        self.hint_name = entry.name + trust_option  # what "heet-tui hosts trust" is told, in its messages
        self.check_only = check_only
        self.python = check_python(entry.name, entry.python)
        self.workdir = check_workdir(entry.name, entry.workdir)
        self.ssh_config = ssh_config
        self.fallback = fallback_known_hosts
        self.timeout = connect_timeout_s
        self.keepalive = keepalive_s
        self.target = target_for(entry, ssh_config, fallback_known_hosts, keepalive_s)
        self._conns: list[asyncssh.SSHClientConnection] = []  # jump hops first, the host last

    def jump_targets(self) -> list[SshTarget]:
        return self._hops(self.entry.jump or self.target.proxy_jump, 0)

    def _hops(self, spec: str | None, depth: int) -> list[SshTarget]:
        """The hops of a jump spec, in the order connected: before the first, the hops of its own
        ProxyJump, as ssh(1) reaches it (`ssh far` through login2 went straight to login2, which
        only the bastion can reach); the later hops of a list are reached through the one before."""
        if not spec:
            return []
        if depth >= MAX_JUMP_DEPTH:
            raise Unreachable(f'host "{self.entry.name}": ProxyJump goes on through more than {MAX_JUMP_DEPTH} '
                              "jump hosts (does one's ProxyJump lead back to another?)")
        hops = []
        for hop in spec.split(","):
            try:
                user, host, port = parse_jump(hop)
            except ValueError as exc:
                raise Unreachable(f'host "{self.entry.name}": {exc}') from None
            hops.append(resolve_target(host, port, user, self.ssh_config, self.fallback, self.keepalive))
        return [*self._hops(hops[0].proxy_jump, depth + 1), *hops]

    async def open_tunnel(self) -> asyncssh.SSHClientConnection | None:
        """Connect through the jump hops (hosts-file ``jump``, else the config's ProxyJump), if any."""
        tunnel: asyncssh.SSHClientConnection | None = None
        for hop in self.jump_targets():
            tunnel = await open_connection(hop, tunnel, self.timeout, f"via jump {hop.alias}: ", self.hint_name)
            self._conns.append(tunnel)
        return tunnel

    async def connect(self) -> asyncssh.SSHClientConnection:
        await self.close()
        # Read afresh at every attempt: a fix to ~/.ssh/config (a User, an IdentityFile) was
        # never seen by a running controller, even on a manual reconnect.
        try:
            self.target = target_for(self.entry, self.ssh_config, self.fallback, self.keepalive)
        except SshConfigError as exc:
            raise Unreachable(str(exc)) from None
        tunnel = await self.open_tunnel()
        conn = await open_connection(self.target, tunnel, self.timeout, "", self.hint_name)
        self._conns.append(conn)
        return conn

    async def open(self, bundle: AgentBundle) -> AgentChannel:
        conn = await self.connect()
        try:
            return await self._start(conn, bundle)
        except ConnectFailure:
            await self.close()
            raise
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            await self.close()
            raise Unreachable(f"{self.target.describe()}: connection failed while starting the agent: "
                              f"{failure_reason(exc)}") from None

    async def _start(self, conn: asyncssh.SSHClientConnection, bundle: AgentBundle) -> AgentChannel:
        command = start_agent(self.python, self.workdir, bundle.file_name, self.entry.name, self.check_only)
        proc = await conn.create_process(in_sh(after_login(command)), encoding=None)
        first = await first_command_line(proc.stdout, self.timeout, self.target.describe())
        for use_sftp in (True, False):
            if not is_need_agent(first):
                break
            # Not deployed yet: the shell waits on this same channel. If SFTP put the file
            # somewhere the shell does not look (an SFTP root that differs from the shell's
            # $HOME), the second round uploads through a shell.
            await self._deploy(conn, bundle, use_sftp)
            proc.stdin.write(b"\n")  # "look again"
            first = await asyncio.wait_for(proc.stdout.readline(), self.timeout)
        if is_need_agent(first):
            proc.close()
            raise AgentFailure(f"the agent was uploaded but is not found in {self.workdir}")

        async def closer() -> None:
            proc.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait_closed(), 5.0)

        return AgentChannel(PushbackReader(first, proc.stdout), proc.stdin, proc.stderr, closer,
                            f"agent on {self.target.describe()}")

    async def _deploy(self, conn: asyncssh.SSHClientConnection, bundle: AgentBundle, use_sftp: bool) -> None:
        """Upload under a temporary name, then rename: concurrent deploys never see half a file."""
        path = f"{sftp_path(self.workdir).rstrip('/')}/{bundle.file_name}"
        tmp = f"{path}.tmp.{secrets.token_hex(4)}"
        if use_sftp:
            try:
                async with conn.start_sftp_client() as sftp:
                    try:  # private as the rest of the workdir (it took the umask, 0644)
                        async with sftp.open(tmp, "wb", asyncssh.SFTPAttrs(permissions=0o600)) as fh:
                            await fh.write(bundle.data)
                    except (asyncssh.Error, OSError):  # a full disk left a partial copy per attempt
                        with contextlib.suppress(asyncssh.Error, OSError):
                            await sftp.remove(tmp)
                        raise
                    try:
                        await sftp.posix_rename(tmp, path)
                    except asyncssh.SFTPError:
                        await sftp.rename(tmp, path)
                return
            except (asyncssh.Error, OSError):
                pass  # no SFTP subsystem (or it failed): fall back to a plain shell upload
        proc = await conn.create_process(in_sh(upload_with_cat(self.workdir, bundle.file_name)), encoding=None)
        try:
            proc.stdin.write(bundle.data)
            proc.stdin.write_eof()
        except OSError:  # it exited before reading (a workdir it cannot write): its status and stderr say why;
            pass  # raised, this read "unreachable: connection failed ...: Channel not open for sending"
        result = await proc.wait(timeout=self.timeout)
        if result.exit_status != 0:
            err = (result.stderr or b"").decode("utf-8", "replace").strip()
            full = any(s in err for s in ("No space left", "Disk quota exceeded", "File too large"))
            raise AgentFailure(f"cannot deploy the agent to {self.workdir} (SFTP and cat both failed): "
                               f"{err or 'exit status ' + str(result.exit_status)}; " + (
                                   "free space on its disk, or give the host a workdir on one with room" if full else
                                   "give the host a workdir it may write") + " (workdir = in the hosts file)")

    async def start_sftp(self) -> asyncssh.SFTPClient | None:
        """An SFTP session on the connection the agent runs over; None when there is none. A plan
        moving 15 jobs opened two fresh SSH connections per checkpoint copy, 7-11 s each."""
        if not self.connected():
            return None
        return await self._conns[-1].start_sftp_client()

    def connected(self) -> bool:
        if not self._conns:
            return False
        transport = self._conns[-1]._transport  # asyncssh has no public "is open" query
        return transport is not None and not transport.is_closing()

    async def close(self) -> None:
        conns, self._conns = self._conns, []
        for conn in reversed(conns):
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2.0)
