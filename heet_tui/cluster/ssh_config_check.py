"""What OpenSSH itself says of the SSH config, for ``heet-tui hosts check``.

asyncssh, which heet-tui connects with, skips directives it does not know: a typo such as
``Portt 22`` or ``ProxyJmup gw`` made ssh(1) refuse the whole config, while heet-tui connected
another way without a word. ``ssh -G`` parses the config exactly as ssh would, and connects to
nothing, so its refusal is shown beside the host.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from heet_tui.cluster.ssh_settings import config_paths
from heet_tui.config.hosts_file import HostsFile

TIMEOUT_S = 10.0


def ssh_config_refusals(hosts_file: HostsFile) -> dict[str, str]:
    """Host name -> what ``ssh -G`` says of its SSH config when it refuses it (none when ssh(1) is
    not installed: the check is OpenSSH's own, not a copy of its rules)."""
    ssh = shutil.which("ssh")
    if ssh is None:
        return {}
    said: dict[tuple[str, str], str] = {}
    out = {}
    for entry in hosts_file.hosts:
        if entry.transport != "ssh":
            continue
        (config, *_) = config_paths(hosts_file.ssh_config) or (None,)  # the file heet-tui reads
        if config is None:
            continue  # no config: nothing of it to refuse
        key = (str(config or ""), entry.address)
        if key not in said:
            said[key] = _refusal(ssh, config, entry.address)
        if said[key]:
            out[entry.name] = said[key]
    return out


def _refusal(ssh: str, config: Path, alias: str) -> str:
    command = [ssh, "-G", "-F", str(config), "--", alias]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode == 0:
        return ""
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Pseudo-terminal" not in line]
    if not any("line" in line or "configuration" in line.lower() for line in lines):
        return ""  # not about the config (ssh -G takes no other failure to mean anything here)
    return ("ssh(1) refuses the SSH config: " + "; ".join(lines[:2]) + " (heet-tui's SSH library skips what it "
            "does not know, so it may connect otherwise than ssh would: fix the config)")
