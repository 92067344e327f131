"""What OpenSSH itself says of the SSH config and the keys it names, for ``heet-tui hosts check``.

asyncssh, which heet-tui connects with, skips directives it does not know: a typo such as
``Portt 22`` or ``ProxyJmup gw`` made ssh(1) refuse the whole config, while heet-tui connected
another way without a word. ``ssh -G`` parses the config exactly as ssh would, and connects to
nothing, so its refusal is shown beside the host.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from pathlib import Path

from heet_tui.cluster.ssh_settings import SshConfigError, SshTarget, config_paths, target_for, with_included
from heet_tui.config.hosts_file import HostsFile
from heet_tui.config.ssh_aliases import directive_args

TIMEOUT_S = 10.0


def ssh_config_refusals(hosts_file: HostsFile) -> dict[str, str]:
    """Host name -> what ``ssh -G`` says of its SSH config when it refuses it, or reads it otherwise
    than heet-tui does (none when ssh(1) is not installed: the check is OpenSSH's own, not a copy
    of its rules)."""
    ssh = shutil.which("ssh")
    (config, *_) = config_paths(hosts_file.ssh_config) or (None,)  # the file heet-tui reads
    if ssh is None or config is None:  # no config: nothing of it to refuse
        return {}
    said: dict[tuple[str, int | None, str | None], str] = {}  # hosts behind one alias are asked once
    out = {}
    for entry in hosts_file.hosts:
        if entry.transport != "ssh":
            continue
        key = (entry.address, entry.port, entry.user)
        if key not in said:
            try:
                target = target_for(entry, hosts_file.ssh_config, Path(os.devnull))
            except SshConfigError:  # the host's own check says so: it was a traceback here
                said[key] = ""
                continue
            said[key] = _refusal(ssh, config, target, entry.port, entry.user, entry.jump is None)
        if said[key]:
            out[entry.name] = said[key]
    return out


def _resolved(ssh: str, config: Path, alias: str, port: int | None = None,
              user: str | None = None) -> subprocess.CompletedProcess[str] | None:
    """``ssh -G``: the settings ssh(1) would use for ``alias`` (it connects nowhere); None when it
    could not be run."""
    given = [*(["-p", str(port)] if port else []), *(["-l", user] if user else [])]
    try:
        return subprocess.run([ssh, "-G", "-F", str(config), *given, "--", alias], capture_output=True, text=True,
                              timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _refusal(ssh: str, config: Path, target: SshTarget, port: int | None, user: str | None,
             compare_jump: bool) -> str:
    done = _resolved(ssh, config, target.alias, port, user)
    if done is None:
        return ""
    if done.returncode == 0:
        settings = _settings(done.stdout)
        return "; ".join(s for s in (_otherwise(settings, target, compare_jump),
                                     _open_keys(settings, target.alias)) if s)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Pseudo-terminal" not in line]
    if not any("line" in line or "configuration" in line.lower() for line in lines):
        return ""  # not about the config (ssh -G takes no other failure to mean anything here)
    return ("ssh(1) refuses the SSH config: " + "; ".join(lines[:2]) + " (heet-tui's SSH library skips what it "
            "does not know, so it may connect otherwise than ssh would: fix the config)")


def _settings(resolved: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in resolved.splitlines():
        words = line.split(None, 1)
        if len(words) == 2:
            out.setdefault(words[0].lower(), []).append(words[1].strip())
    return out


def _otherwise(settings: dict[str, list[str]], target: SshTarget, compare_jump: bool) -> str:
    """Where ssh(1) and heet-tui's SSH library read the config differently for this host. Seen: a
    ``Match exec`` whose command held %-tokens (asyncssh runs it unexpanded) gave ssh another
    port; the host read "Connection refused" on port 22 while `ssh alias` logged in."""
    def first(key: str) -> str:
        return (settings.get(key) or [""])[0]

    ours = (target.hostname.lower(), str(target.port), target.user or getpass.getuser(),
            _jumps(target.proxy_jump or "") if compare_jump else "")
    theirs = (first("hostname").lower(), first("port"), first("user"),
              _jumps("" if first("proxyjump").lower() == "none" else first("proxyjump")) if compare_jump else "")
    if ours == theirs or not theirs[0]:
        return ""

    def said(host: str, port: str, login: str, jump: str) -> str:
        return f"{login}@{host}:{port}" + (f" via {jump}" if jump else "")
    return (f"ssh(1) reads the SSH config as {said(*theirs)}, heet-tui's SSH library as {said(*ours)} (it does not "
            "expand %-tokens in a Match exec command, and skips what it does not know); give the host's "
            "address, port or user in the hosts file, or make the config say it plainly")


def _jumps(text: str) -> str:
    """A ProxyJump as both sides would name it: ssh -G writes a numeric jump host in brackets
    ("[127.0.0.2]:60985") and keeps an ssh:// form; an ordinary jump read as a difference."""
    hops = []
    for hop in filter(None, (h.strip() for h in text.split(","))):
        hop = hop.removeprefix("ssh://")
        user, _, rest = hop.rpartition("@")
        if rest.startswith("["):
            host, _, port = rest[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = rest.partition(":")
        hops.append(f"{user + '@' if user else ''}{host.lower()}{':' + port if port and port != '22' else ''}")
    return ",".join(hops)


def _open_keys(settings: dict[str, list[str]], alias: str) -> str:
    """The key files ``ssh -G`` resolved for the host that others may read: ssh(1) refuses such a
    key ("UNPROTECTED PRIVATE KEY FILE") and heet-tui's SSH library used it without a word."""
    open_ = []
    for raw in settings.get("identityfile", []):
        path = _expanded(raw, settings, alias)
        try:
            mode = path.stat().st_mode if path is not None else 0
        except OSError:
            continue
        if mode & 0o077:
            open_.append(f"{path} (mode {oct(mode & 0o777)[2:]})")
    if not open_:
        return ""
    return (f"the key file {', '.join(open_)} may be read by others: ssh(1) refuses such a key (UNPROTECTED PRIVATE "
            f"KEY FILE) while heet-tui's SSH library uses it; chmod 600 it")


def _expanded(raw: str, settings: dict[str, list[str]], alias: str) -> Path | None:
    """An IdentityFile as ssh(1) reads it: ``ssh -G`` prints ``~/.ssh/%r@%h`` unexpanded, so a
    world-readable key named with tokens went unchecked. None for a token not known here."""
    values = {"%": "%", "h": (settings.get("hostname") or [alias])[0], "r": (settings.get("user") or [""])[0],
              "p": (settings.get("port") or ["22"])[0], "n": alias, "u": getpass.getuser(),
              "d": os.path.expanduser("~"), "l": socket.gethostname().split(".")[0], "L": socket.gethostname(),
              "i": str(os.getuid())}
    raw = os.path.expandvars(raw)  # ${VAR}, as ssh(1) expands in IdentityFile
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "%" and i + 1 < len(raw):
            if raw[i + 1] not in values:
                return None
            out.append(values[raw[i + 1]])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return Path(os.path.expanduser("".join(out)))


def hashes_known_hosts(target: SshTarget) -> bool:
    """Whether ssh(1) writes this host's name hashed (``HashKnownHosts``), as ``ssh -G`` resolves it
    for the host, Host and Match blocks included (asyncssh does not read the option; the first line
    naming it anywhere was taken, a "no" for one host hid the "yes" under ``Host *``). Without ssh,
    the first value the configs give."""
    ssh, config = shutil.which("ssh"), (target.config_paths or (None,))[0]
    if config is None:
        return False
    if ssh is not None:
        done = _resolved(ssh, config, target.alias)
        if done is not None and done.returncode == 0:
            return any(line.split()[:2] == ["hashknownhosts", "yes"] for line in done.stdout.splitlines())
    for path in with_included(target.config_paths):
        try:
            found = directive_args(path.expanduser().read_text(encoding="utf-8", errors="replace"), "hashknownhosts")
        except OSError:
            continue
        if found:
            return found[0][0].lower() == "yes"
    return False
