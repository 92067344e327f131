"""What OpenSSH itself says of the SSH config and the keys it names, for ``heet-tui hosts check``.

asyncssh, which heet-tui connects with, skips directives it does not know: a typo such as
``Portt 22`` or ``ProxyJmup gw`` made ssh(1) refuse the whole config, while heet-tui connected
another way without a word. ``ssh -G`` parses the config exactly as ssh would, and connects to
nothing, so its refusal is shown beside the host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from heet_tui.cluster.ssh_settings import SshTarget, config_paths, with_included
from heet_tui.config.hosts_file import HostsFile
from heet_tui.config.ssh_aliases import directive_args

TIMEOUT_S = 10.0


def ssh_config_refusals(hosts_file: HostsFile) -> dict[str, str]:
    """Host name -> what ``ssh -G`` says of its SSH config when it refuses it (none when ssh(1) is
    not installed: the check is OpenSSH's own, not a copy of its rules)."""
    ssh = shutil.which("ssh")
    (config, *_) = config_paths(hosts_file.ssh_config) or (None,)  # the file heet-tui reads
    if ssh is None or config is None:  # no config: nothing of it to refuse
        return {}
    said: dict[str, str] = {}  # by address: hosts behind one alias are asked once
    out = {}
    for entry in hosts_file.hosts:
        if entry.transport != "ssh":
            continue
        if entry.address not in said:
            said[entry.address] = _refusal(ssh, config, entry.address)
        if said[entry.address]:
            out[entry.name] = said[entry.address]
    return out


def _resolved(ssh: str, config: Path, alias: str) -> subprocess.CompletedProcess[str] | None:
    """``ssh -G``: the settings ssh(1) would use for ``alias`` (it connects nowhere); None when it
    could not be run."""
    try:
        return subprocess.run([ssh, "-G", "-F", str(config), "--", alias], capture_output=True, text=True,
                              timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _refusal(ssh: str, config: Path, alias: str) -> str:
    done = _resolved(ssh, config, alias)
    if done is None:
        return ""
    if done.returncode == 0:
        return _open_keys(done.stdout)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Pseudo-terminal" not in line]
    if not any("line" in line or "configuration" in line.lower() for line in lines):
        return ""  # not about the config (ssh -G takes no other failure to mean anything here)
    return ("ssh(1) refuses the SSH config: " + "; ".join(lines[:2]) + " (heet-tui's SSH library skips what it "
            "does not know, so it may connect otherwise than ssh would: fix the config)")


def _open_keys(resolved: str) -> str:
    """The key files ``ssh -G`` resolved for the host that others may read: ssh(1) refuses such a
    key ("UNPROTECTED PRIVATE KEY FILE") and heet-tui's SSH library used it without a word."""
    open_ = []
    for line in resolved.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0].lower() == "identityfile":
            path = Path(os.path.expanduser(words[1].strip()))
            try:
                mode = path.stat().st_mode
            except OSError:
                continue
            if mode & 0o077:
                open_.append(f"{path} (mode {oct(mode & 0o777)[2:]})")
    if not open_:
        return ""
    return (f"the key file {', '.join(open_)} may be read by others: ssh(1) refuses such a key (UNPROTECTED PRIVATE "
            f"KEY FILE) while heet-tui's SSH library uses it; chmod 600 it")


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
