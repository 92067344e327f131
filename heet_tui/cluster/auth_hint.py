"""What an SSH login refused was tried with, so the user knows which key to fix.

"check IdentityFile, ssh-agent and authorized_keys" sent an admin through all three; the
keys asyncssh offers follow from the SSH config's IdentityFile (else the default files in
~/.ssh) and the agent, both known here before the connection.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa", "id_ed25519_sk", "id_ecdsa_sk", "id_dsa")


def _shown(path: Path) -> str:
    home = Path("~").expanduser()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def keys_offered(identity_files: tuple[Path, ...], identities_only: bool, identity_agent: str | None = None) -> str:
    """A phrase: the key files and the agent that a login offered (the config's IdentityAgent, else
    $SSH_AUTH_SOCK: with an IdentityAgent set, an empty agent read "no ssh-agent ($SSH_AUTH_SOCK is
    not set)")."""
    if identity_files:
        found = [_shown(p) for p in identity_files if p.is_file()]
        missing = [_shown(p) for p in identity_files if not p.is_file()]
        said = f"{', '.join(found)} (IdentityFile)" if found else "no key"
        if missing:
            said += f" ({', '.join(missing)}, named by IdentityFile, does not exist)"
    else:
        found = [_shown(p) for name in DEFAULT_KEYS if (p := Path(f"~/.ssh/{name}").expanduser()).is_file()]
        said = f"{', '.join(found)} (no IdentityFile set)" if found else "no key (no IdentityFile set, none in ~/.ssh)"
    named = identity_agent is not None and identity_agent != "SSH_AUTH_SOCK"
    if named and identity_agent.lower() == "none":
        agent = "no ssh-agent (IdentityAgent none)"
    else:
        sock = os.path.expanduser(os.path.expandvars(identity_agent)) if named else os.environ.get("SSH_AUTH_SOCK")
        source = f"IdentityAgent {_shown(Path(sock))}" if named else "$SSH_AUTH_SOCK"
        if not sock or not os.path.exists(sock):
            agent = f"no ssh-agent ({source} is " + ("not set)" if not sock else "gone)")
        elif identities_only:
            agent = f"no other key of the ssh-agent ({source}; IdentitiesOnly)"
        else:
            agent = f"the keys of the ssh-agent at {source} (`ssh-add -l` lists them)"
    return f"it offered {said} and {agent}; a key with a passphrase works only through ssh-agent"
