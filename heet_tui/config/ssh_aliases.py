"""The host aliases an SSH config names (its ``Host`` lines, patterns left out).

Read as text, without connecting: the host form asks whether a new host's name is one the user
reaches over SSH, where the form offered "local (this machine)" (the bundled config's hosts are
all local) and a lab machine's alias was saved as a local host, its jobs run on the login node.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_CONFIG = Path("~/.ssh/config")


def ssh_aliases(config: Path | None = None) -> set[str]:
    """Every plain name on a ``Host`` line (no ``*``, ``?`` or ``!``); none where it cannot be read."""
    path = (config or DEFAULT_CONFIG).expanduser()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {w for words in directive_args(text, "host") for w in words if not any(c in w for c in "*?!")}


def directive_args(text: str, keyword: str) -> list[list[str]]:
    """The arguments of each ``keyword`` line of an OpenSSH config (``Key value`` or ``Key=value``,
    the keyword in any case), in file order."""
    out = []
    for line in text.splitlines():
        words = line.replace("=", " ", 1).split()
        if len(words) > 1 and words[0].lower() == keyword:
            out.append(words[1:])
    return out
