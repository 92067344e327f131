"""Host-key approval: read a host's key fingerprint, and record an approved key in known_hosts.

Trust is explicit: ``trust_host`` re-reads the key and records it only if it still has the
fingerprint the user approved, so a key swapped between "show" and "yes" is never recorded.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncssh

from heet_tui.cluster.errors import ClusterError, HostKeyUnknown, Unreachable
from heet_tui.cluster.options import default_known_hosts
from heet_tui.cluster.ssh_settings import SshTarget
from heet_tui.cluster.ssh_transport import SshTransport, failure_reason
from heet_tui.config.hosts_file import HostEntry


async def _read_key(entry: HostEntry, ssh_config: Path | None, fallback: Path,
                    timeout_s: float) -> tuple[SshTarget, asyncssh.SSHKey]:
    transport = SshTransport(entry, ssh_config, fallback, timeout_s)
    try:
        tunnel = await transport.open_tunnel()
        target = transport.target
        try:
            key = await asyncio.wait_for(asyncssh.get_server_host_key(
                target.alias, target.port, tunnel=tunnel, config=[str(p) for p in target.config_paths]), timeout_s)
        except (TimeoutError, OSError, asyncssh.Error) as exc:
            raise Unreachable(f"cannot read the host key of {target.describe()}: {failure_reason(exc)}") from None
        if key is None:
            raise ClusterError(f"{target.describe()} presented no host key")
        return target, key
    finally:
        await transport.close()


async def fetch_host_key_fingerprint(entry: HostEntry, ssh_config: Path | None = None,
                                     fallback_known_hosts: Path | None = None,
                                     timeout_s: float = 15.0) -> tuple[str, str, Path]:
    """``(fingerprint, key type, known_hosts file it would be recorded in)`` for a host."""
    fallback = fallback_known_hosts or default_known_hosts()
    target, key = await _read_key(entry, ssh_config, fallback, timeout_s)
    return key.get_fingerprint("sha256"), key.get_algorithm(), target.trust_file


async def trust_host(entry: HostEntry, fingerprint: str, ssh_config: Path | None = None,
                     fallback_known_hosts: Path | None = None, timeout_s: float = 15.0) -> Path:
    """Record the host's key in known_hosts if it has ``fingerprint``; returns the file written.

    The file is the SSH config's ``UserKnownHostsFile`` for that host when it names one, else
    ``~/.config/heet-tui/known_hosts``. Raises ``HostKeyUnknown`` when the key differs.
    """
    fallback = fallback_known_hosts or default_known_hosts()
    target, key = await _read_key(entry, ssh_config, fallback, timeout_s)
    actual = key.get_fingerprint("sha256")
    if actual != fingerprint.strip():
        raise HostKeyUnknown(f"host {entry.name} now presents {actual}, not the approved {fingerprint}; "
                             "not recorded", actual)
    public = key.export_public_key("openssh").decode("ascii").split()
    line = f"{target.known_hosts_pattern} {public[0]} {public[1]}\n"
    path = target.trust_file
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text().splitlines(keepends=True) if path.is_file() else []
    # An approved key replaces older plain entries of the same type for this host (a key that
    # changed, e.g. after a reinstall); other types and other hosts' lines stay as they are.
    kept = [old for old in existing if old.split()[:2] != [target.known_hosts_pattern, public[0]]]
    kept = [old if old.endswith("\n") else old + "\n" for old in kept]
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_text("".join(kept) + line)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


async def is_trusted(entry: HostEntry, ssh_config: Path | None = None, fallback_known_hosts: Path | None = None,
                     timeout_s: float = 15.0) -> bool:
    """Whether the key the host presents now is already in the known_hosts it is checked against."""
    from heet_tui.cluster.ssh_settings import known_hosts_arg

    fallback = fallback_known_hosts or default_known_hosts()
    target, key = await _read_key(entry, ssh_config, fallback, timeout_s)
    try:
        trusted = known_hosts_arg(target).match(target.hostname, "", target.port)[0]
    except Exception:
        return False
    return any(k.public_data == key.public_data for k in trusted)
