"""Which lines of a known_hosts file name a host, as OpenSSH reads them.

An approved key replaces the host's older key of its type. Matching the first field to
``[host]:port`` as text missed the forms OpenSSH writes too: hashed names (``|1|salt|hash``,
``HashKnownHosts yes``) and lists (``host,10.0.0.5``). The old key stayed beside the new one, and
both were accepted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from pathlib import Path


def names_host(field: str, pattern: str) -> bool:
    """True when a known_hosts host field names ``pattern`` (``host`` or ``[host]:port``)
    itself; wildcard and negated patterns are left alone (they name more than this host)."""
    if field.startswith("|1|"):
        try:
            _, _, salt, digest = field.split("|")
            want = base64.b64decode(digest, validate=True)
            mac = hmac.new(base64.b64decode(salt, validate=True), pattern.encode(), hashlib.sha1).digest()
        except (ValueError, binascii.Error):
            return False
        return hmac.compare_digest(mac, want)
    return any(name.lower() == pattern.lower() for name in field.split(","))


def _gives_key(line: str, pattern: str, key_type: str) -> list[str] | None:
    """The line's fields when it gives ``pattern`` a key of ``key_type`` (markers such as
    ``@revoked`` and ``@cert-authority`` are not a host's key), else None."""
    fields = line.split()
    if len(fields) < 3 or line.lstrip().startswith(("#", "@")) or fields[1] != key_type:
        return None
    return fields if names_host(fields[0], pattern) else None


def without_host_key(lines: list[str], pattern: str, key_type: str) -> list[str]:
    """``lines`` less those giving ``pattern`` a key of ``key_type``."""
    return [line for line in lines if _gives_key(line, pattern, key_type) is None]


def holding_other_key(files: tuple[Path, ...], pattern: str, key_type: str, key_b64: str) -> list[Path]:
    """The files that still give ``pattern`` another key of ``key_type``."""
    out = []
    for path in files:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if any((f := _gives_key(line, pattern, key_type)) is not None and f[2] != key_b64 for line in lines):
            out.append(path)
    return out


def hashed_name(pattern: str, salt: bytes | None = None) -> str:
    """``pattern`` as ``HashKnownHosts yes`` writes it (``|1|salt|HMAC-SHA1``): a plain line in a
    file ssh keeps hashed listed the lab's hosts to whoever reads it."""
    salt = salt if salt is not None else os.urandom(20)
    mac = hmac.new(salt, pattern.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(mac).decode()}"
