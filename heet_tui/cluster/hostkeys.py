"""Host-key approval: read a host's key fingerprint, and record an approved key in known_hosts.

Trust is explicit: ``trust_host`` re-reads the key and records it only if it still has the
fingerprint the user approved, so a key swapped between "show" and "yes" is never recorded.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import asyncssh

from heet_tui.cluster.errors import ClusterError, HostKeyUnknown, Unreachable
from heet_tui.cluster.known_hosts_lines import hashed_name, holding_other_key, without_host_key
from heet_tui.cluster.options import default_known_hosts
from heet_tui.cluster.ssh_config_check import hashes_known_hosts
from heet_tui.cluster.ssh_settings import SshTarget, key_revoked, known_hosts_arg, revoked_message
from heet_tui.cluster.ssh_transport import SshTransport, failure_reason, open_connection, server_key
from heet_tui.config.file_safety import write_private
from heet_tui.config.hosts_file import HostEntry


@dataclass(frozen=True, slots=True)
class KeyToApprove:
    """The key a user approves next on the way to a host, and whose it is."""

    target: SshTarget
    key: asyncssh.SSHKey
    via: str  # the jump host it belongs to; "" when it is the host's own
    trusted: bool  # already in the known_hosts it is checked against
    changed: bool = False  # known_hosts holds another key for it: what a man-in-the-middle looks like

    @property
    def fingerprint(self) -> str:
        return self.key.get_fingerprint("sha256")


async def next_key(entry: HostEntry, ssh_config: Path | None, fallback: Path, timeout_s: float) -> KeyToApprove:
    """A jump host's key that is not known yet (nothing past that hop can be reached until it is
    trusted), else the host's own. Trusting the host read only the host's key, through a tunnel
    that the unknown jump key refused: "trust node2" failed with the very message that told the
    user to run it, and the jump host, not in the hosts file, could not be named instead."""
    transport = SshTransport(entry, ssh_config, fallback, timeout_s)
    opened: list[asyncssh.SSHClientConnection] = []
    try:
        tunnel = None
        for hop in transport.jump_targets():
            try:
                tunnel = await open_connection(hop, tunnel, timeout_s, f"via jump {hop.alias}: ")
            except HostKeyUnknown as exc:
                return KeyToApprove(hop, await _server_key(hop, tunnel, timeout_s), hop.alias, False, exc.changed)
            opened.append(tunnel)
        target = transport.target
        key = await _server_key(target, tunnel, timeout_s)
        if key_revoked(target, key):
            raise HostKeyUnknown(revoked_message(target, key.get_fingerprint("sha256")), key.get_fingerprint("sha256"))
        trusted, others = _known(target, key)
        return KeyToApprove(target, key, "", trusted, not trusted and others)
    finally:
        for conn in reversed(opened):
            conn.close()
        await transport.close()


async def _server_key(target: SshTarget, tunnel: asyncssh.SSHClientConnection | None,
                      timeout_s: float) -> asyncssh.SSHKey:
    try:
        key = await server_key(target, tunnel, timeout_s)
    except (TimeoutError, OSError, asyncssh.Error) as exc:
        raise Unreachable(f"cannot read the host key of {target.describe()}: {failure_reason(exc)}") from None
    if key is None:
        raise ClusterError(f"{target.describe()} presented no host key")
    return key


def _known(target: SshTarget, key: asyncssh.SSHKey) -> tuple[bool, bool]:
    """Whether ``key`` is in the known_hosts the target is checked against, and whether any is."""
    try:
        trusted = target.known_keys(known_hosts_arg(target))[0]
    except Exception:
        return False, False
    return any(k.public_data == key.public_data for k in trusted), bool(trusted)


async def fetch_host_key_fingerprint(entry: HostEntry, ssh_config: Path | None = None,
                                     fallback_known_hosts: Path | None = None,
                                     timeout_s: float = 15.0) -> KeyToApprove:
    """The key to approve next on the way to a host (a jump host's, or its own), and where it goes."""
    return await next_key(entry, ssh_config, fallback_known_hosts or default_known_hosts(), timeout_s)


async def trust_host(entry: HostEntry, fingerprint: str, ssh_config: Path | None = None,
                     fallback_known_hosts: Path | None = None, timeout_s: float = 15.0) -> Recorded:
    """Record the key to approve next on the way to the host (a jump host's not known yet, else
    the host's own) if it has ``fingerprint``; returns the file written, and what to say of another
    known_hosts file that still accepts the old key (the CLI said it, the TUI's trust did not).

    The file is the SSH config's ``UserKnownHostsFile`` for that host when it names one, else
    ``~/.config/heet-tui/known_hosts``. Raises ``HostKeyUnknown`` when the key differs.
    """
    found = await next_key(entry, ssh_config, fallback_known_hosts or default_known_hosts(), timeout_s)
    target, key = found.target, found.key
    actual = found.fingerprint
    if actual != fingerprint.strip():
        whose = f"jump host {found.via} (on the way to {entry.name})" if found.via else f"host {entry.name}"
        raise HostKeyUnknown(f"{whose} now presents {actual}, not the approved {fingerprint}; not recorded", actual)
    public = key.export_public_key("openssh").decode("ascii").split()
    name = hashed_name(target.known_hosts_pattern) if hashes_known_hosts(target) else target.known_hosts_pattern
    line = f"{name} {public[0]} {public[1]}\n"
    path = target.trust_file
    # a known_hosts that links into a dotfiles repo is written where it links: replacing the link
    # with a plain file left the linked one without the key, and the next machine asked again
    path = path.resolve() if path.is_symlink() else path
    if path.exists() and not path.is_file():  # UserKnownHostsFile /dev/null: replacing it would break the system
        raise HostKeyUnknown(f"{path} is not a regular file: not recorded there (UserKnownHostsFile?)", actual)
    existing = path.read_text().splitlines(keepends=True) if path.is_file() else []
    # An approved key replaces older entries of the same type for this host, hashed or listed
    # with others (a key that changed, e.g. after a reinstall); other types and hosts stay.
    kept = without_host_key(existing, target.known_hosts_pattern, public[0])
    kept = [old if old.endswith("\n") else old + "\n" for old in kept]
    write_private(path, "".join(kept) + line)
    return Recorded(path, still_trusting_old_key(target, key))


class Recorded(NamedTuple):
    path: Path
    stale: str  # "; FILE still holds its old key, ...", else ""


def still_trusting_old_key(target: SshTarget, key: asyncssh.SSHKey) -> str:
    """What to tell the user when another known_hosts file heet-tui reads (and does not edit:
    ~/.ssh/known_hosts, the system's) still holds an older key of the type for the host, which
    is accepted as well as the new one; "" when none does."""
    public = key.export_public_key("openssh").decode("ascii").split()
    others = tuple(p for p in target.known_hosts if p != target.trust_file)
    stale = holding_other_key(others, target.known_hosts_pattern, public[0], public[1])
    return "".join(f"; {p} still holds its old key, which is still accepted: remove it with ssh-keygen -R "
                   f"{shlex.quote(target.known_hosts_pattern)} -f {shlex.quote(str(p))}" for p in stale)
