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
    names: set[str] = set()
    for line in text.splitlines():
        words = line.replace("=", " ", 1).split()
        if len(words) > 1 and words[0].lower() == "host":
            names.update(w for w in words[1:] if not any(c in w for c in "*?!"))
    return names
