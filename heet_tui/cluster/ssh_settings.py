"""How to reach one host over SSH: the asyncssh options derived from a HostEntry and SSH config.

The hosts file's ``[defaults] ssh_config`` (else ``~/.ssh/config``) supplies identities,
known_hosts, ProxyJump and keepalives exactly as OpenSSH would read them; the hosts file's own
``address``, ``port``, ``user`` and ``jump`` win over it. Host keys are always verified: when
the config names no known_hosts file we use ``~/.ssh/known_hosts`` plus heet's own file.
"""

from __future__ import annotations

import getpass
import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncssh.config import SSHClientConfig

from heet_tui.cluster.errors import ClusterError
from heet_tui.config.fields import JUMP_SPEC
from heet_tui.config.file_safety import others_can_write
from heet_tui.config.hosts_file import HostEntry
from heet_tui.config.plain_files import NotPlainFile, read_plain_text
from heet_tui.config.ssh_aliases import directive_args

_JUMP = JUMP_SPEC
SSH_CONFIG_LIMIT = 4 << 20  # an SSH config, with what it includes, is a few KB


@dataclass(frozen=True, slots=True)
class SshTarget:
    """What asyncssh connects to, after the SSH config is applied (for known_hosts and messages)."""

    alias: str  # what the user wrote (address or jump spec host)
    hostname: str  # after the config's Hostname
    port: int
    user: str | None
    config_paths: tuple[Path, ...]
    known_hosts: tuple[Path, ...]
    trust_file: Path  # where an approved key is recorded
    proxy_jump: str | None  # from the config, when the hosts file names no jump
    keepalive_s: float
    identity_files: tuple[Path, ...] = ()  # the config's IdentityFile, for a refused login's message
    identities_only: bool = False
    connect_timeout_s: float | None = None  # the config's ConnectTimeout
    host_key_alias: str | None = None  # the config's HostKeyAlias: the name its key is kept under
    identity_agent: str | None = None  # the config's IdentityAgent: the agent its logins ask

    @property
    def known_hosts_pattern(self) -> str:
        """The name known_hosts keeps the key under, as ssh(1) writes it: a HostKeyAlias alone (no
        port), else the host name and its port. Keys were recorded under the address while
        asyncssh, as ssh, looked up the alias: trusted keys read as unknown, then as changed."""
        if self.host_key_alias:
            return self.host_key_alias
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"

    def known_keys(self, known_hosts: Any) -> Any:
        """``known_hosts.match`` for the name the key is kept under (asyncssh tries it with the port,
        then without)."""
        return known_hosts.match(self.host_key_alias or self.hostname, "", self.port)

    def describe(self) -> str:
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.hostname}:{self.port}"


def config_paths(ssh_config: Path | None) -> tuple[Path, ...]:
    if ssh_config is not None:
        return (ssh_config,)
    default = Path("~/.ssh/config").expanduser()
    return (default,) if os.access(default, os.R_OK) else ()


def _lookup(paths: tuple[Path, ...], host: str, user: str | None, port: int | None) -> SSHClientConfig:
    # Reuses asyncssh's own OpenSSH-config reader so Host/Match/Include behave as asyncssh will.
    for path in with_included(paths):  # its ProxyCommand runs as you: ssh refuses a config others may change
        if os.path.realpath(path.expanduser()) == os.devnull:  # ssh -F /dev/null: no config, nothing to run
            continue
        if (why := others_can_write(path)) is not None:
            link = "on the way to it is a link" in why  # which ssh follows: not "ssh refuses it too"
            raise SshConfigError(f"ssh_config {path}: refused: {why}, and its ProxyCommand and Match exec run as "
                                 + ("you; use its own path, or a link of your own" if link else
                                    "you (ssh refuses such a config too); make it yours alone"))
    try:
        return SSHClientConfig.load(None, list(paths), False, False, False, getpass.getuser(),
                                    user if user else (), host, port if port else ())
    except OSError as exc:
        raise SshConfigError(f"ssh_config {exc.filename or paths[0]}: {exc.strerror or exc}") from None
    except ValueError as exc:  # asyncssh's ConfigParseError names the file and line
        hint = (" (as asyncssh, which heet-tui connects with, reads it: OpenSSH takes some Match lines it "
                "cannot, as one with a quoted '=' in exec; give heet-tui an SSH config of its own with "
                'ssh_config = "..." in the hosts file\'s [defaults])') if "match" in str(exc).lower() else ""
        raise SshConfigError(f"ssh_config: {exc}{hint}") from None


def with_included(paths: tuple[Path, ...], depth: int = 0) -> list[Path]:
    """The configs and every file their ``Include`` lines name (relative ones under ~/.ssh, as ssh
    reads them): an included file another user owned ran its ProxyCommand as root, past the check
    of the file that included it."""
    out = list(paths)
    if depth > 8:  # an Include loop: ssh refuses it too
        return out
    for path in paths:
        try:
            text = read_plain_text(path, SSH_CONFIG_LIMIT, "an SSH config", errors="replace", pipes=False)
        except NotPlainFile as exc:  # asyncssh would read it whole next: memory ran out on /dev/zero
            raise SshConfigError(f"ssh_config {path}: {exc.strerror}") from None
        except (OSError, UnicodeDecodeError):
            continue
        for words in directive_args(text, "include"):
            for pattern in words:
                name = Path(os.path.expanduser(pattern))
                name = name if name.is_absolute() else Path("~/.ssh").expanduser() / name
                found = tuple(Path(p) for p in sorted(glob.glob(str(name))))
                out += with_included(found, depth + 1)
    return out


class SshConfigError(ClusterError, ValueError):
    """The SSH config file is missing or invalid; the message names the file (and line)."""


def resolve_target(alias: str, port: int | None, user: str | None, ssh_config: Path | None,
                   fallback_known_hosts: Path, keepalive_s: float = 5.0) -> SshTarget:
    paths = config_paths(ssh_config)
    config = _lookup(paths, alias, user, port)
    hostname = str(config.get("Hostname", alias))
    resolved_port = int(port or config.get("Port", 22) or 22)
    resolved_user = user or (str(config.get("User")) if config.get("User") else None)
    listed = config.get("UserKnownHostsFile", ())
    files = [Path(os.path.expanduser(str(p))) for p in listed or () if str(p).lower() != "none"]
    if ssh_config is not None:
        files = [p if p.is_absolute() else (ssh_config.parent / p) for p in files]
    if files:
        known, trust_file = tuple(files), files[0]
    else:
        known = (Path("~/.ssh/known_hosts").expanduser(), Path("~/.ssh/known_hosts2").expanduser(),
                 fallback_known_hosts)
        trust_file = fallback_known_hosts
    # and the system's, as ssh(1) reads them: a site that hands out its hosts' keys there had a
    # key OpenSSH calls CHANGED taken as merely unknown, and recorded by `hosts trust --yes`
    listed = config.get("GlobalKnownHostsFile", ())
    system = [Path(os.path.expanduser(str(p))) for p in listed or () if str(p).lower() != "none"] if listed \
        else [Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2")]
    known = (*known, *system)
    jump = config.get("ProxyJump")
    interval = config.get("ServerAliveInterval")
    identities = tuple(Path(os.path.expanduser(str(p))) for p in config.get("IdentityFile", ()) or ())
    timeout = config.get("ConnectTimeout")
    return SshTarget(alias, hostname, resolved_port, resolved_user, paths, known, trust_file,
                     str(jump) if jump and str(jump).lower() != "none" else None,
                     float(interval) if interval else keepalive_s, identities, bool(config.get("IdentitiesOnly")),
                     float(timeout) if timeout else None,
                     str(config.get("HostKeyAlias")) if config.get("HostKeyAlias") else None,
                     _identity_agent(config.get("IdentityAgent", ())))


def _identity_agent(value: object) -> str | None:
    """The config's IdentityAgent as written: asyncssh reads "none" as None, like no setting at all."""
    if value == ():
        return None
    return "none" if value is None else str(value)


def target_for(entry: HostEntry, ssh_config: Path | None, fallback_known_hosts: Path,
               keepalive_s: float = 5.0) -> SshTarget:
    # A port the hosts file leaves out is the SSH config's, as ssh(1) would take for `ssh alias`;
    # one it sets wins, 22 included (it once meant "not set", so `port = 22` was overridden).
    return resolve_target(entry.address, entry.port, entry.user, ssh_config, fallback_known_hosts, keepalive_s)


def parse_jump(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` -> (user, host, port); raises ValueError naming the spec."""
    match = _JUMP.match(spec.strip())
    if not match:
        raise ValueError(f'jump host "{spec}" is not of the form [user@]host[:port]')
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise ValueError(f'jump host "{spec}": port {port} is out of range')
    return match.group("user"), match.group("host").strip("[]"), port


def known_hosts_arg(target: SshTarget) -> Any:
    """The ``known_hosts`` value for asyncssh: the files that exist, or an empty set (never None)."""
    import asyncssh

    existing = [str(p) for p in target.known_hosts if p.is_file()]
    return asyncssh.read_known_hosts(existing) if existing else asyncssh.import_known_hosts("")


def key_revoked(target: SshTarget, key: Any) -> bool:
    """Whether a known_hosts file the target is checked against marks ``key`` ``@revoked``."""
    try:
        revoked = target.known_keys(known_hosts_arg(target))[2]
    except Exception:  # noqa: BLE001 - an unreadable file revokes nothing
        return False
    return any(k.public_data == key.public_data for k in revoked)


def revoked_message(target: SshTarget, fingerprint: str) -> str:
    return (f"host key {fingerprint} of {target.known_hosts_pattern} is REVOKED (an @revoked line of "
            f"{', '.join(str(p) for p in target.known_hosts if p.is_file())}): heet-tui does not connect, as ssh(1) "
            "does not, and it cannot be trusted here; the host needs a new key from its admin")


def connect_kwargs(target: SshTarget, connect_timeout_s: float) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "host": target.alias,
        "port": target.port,
        "config": [str(p) for p in target.config_paths],
        "known_hosts": known_hosts_arg(target),
        "keepalive_interval": target.keepalive_s,
        "keepalive_count_max": 3,
        # the config's ConnectTimeout, shorter (a host known to be down is said so sooner) or longer (a
        # slow link's); the login may take as long as the caller allows
        "connect_timeout": target.connect_timeout_s or connect_timeout_s,
        "login_timeout": connect_timeout_s,
        # never a terminal, whatever RequestTTY says (it is meant for interactive logins): through a
        # pty the agent's JSON lines were echoed and cut at 4,095 bytes, and no launch was answered
        "request_pty": False,
    }
    if target.user:
        kwargs["username"] = target.user
    agent = target.identity_agent
    if agent and agent.lower() != "none" and (agent == "SSH_AUTH_SOCK" or "$" in agent):
        # as ssh(1) reads them: the literal SSH_AUTH_SOCK names the environment's agent, and ${VAR} is
        # expanded; asyncssh took both for file names, and a login ssh made was refused
        path = os.environ.get("SSH_AUTH_SOCK") if agent == "SSH_AUTH_SOCK" else os.path.expandvars(agent)
        kwargs["agent_path"] = os.path.expanduser(path) if path else None
    files = target.identity_files
    present = [str(p) for p in files if p.is_file()]
    if present and len(present) < len(files) and not any("%" in str(p) for p in files):
        # ssh(1) skips an IdentityFile that is not there and logs in with the next; asyncssh failed
        # on it ("the key file ... does not exist") though a key the config names would do. Given
        # as they are in the config, the keys it lists that exist; encrypted ones skipped as then
        kwargs["client_keys"] = present
        kwargs["ignore_encrypted"] = True
    return kwargs
