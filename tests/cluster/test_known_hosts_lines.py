"""known_hosts lines name a host as OpenSSH reads them: hashed, in lists, bracketed with a port."""

from __future__ import annotations

import subprocess
from pathlib import Path

from heet_tui.cluster.known_hosts_lines import holding_other_key, names_host, without_host_key

KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOld"


def _hashed(tmp_path: Path, line: str) -> str:
    path = tmp_path / "kh"
    path.write_text(line + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(path)], check=True, capture_output=True)
    return path.read_text().splitlines()[0]


def test_hashed_listed_and_plain_names(tmp_path: Path) -> None:
    hashed = _hashed(tmp_path, f"[gpu1]:2222 ssh-ed25519 {KEY}").split()[0]
    assert hashed.startswith("|1|") and names_host(hashed, "[gpu1]:2222") and not names_host(hashed, "gpu1")
    assert names_host("gpu1,10.0.0.5", "gpu1") and names_host("GPU1", "gpu1")
    assert not names_host("gpu*", "gpu1"), "a wildcard names more than the host: left alone"
    assert not names_host("|1|not base64|x", "gpu1")


def test_only_the_hosts_key_of_that_type_goes_and_markers_stay(tmp_path: Path) -> None:
    lines = [f"gpu1,10.0.0.5 ssh-ed25519 {KEY}\n", f"gpu1 ssh-rsa {KEY}\n", f"gpu2 ssh-ed25519 {KEY}\n",
             f"@revoked gpu1 ssh-ed25519 {KEY}\n", "# gpu1 ssh-ed25519 comment\n"]
    assert without_host_key(lines, "gpu1", "ssh-ed25519") == lines[1:]


def test_other_files_still_giving_the_host_another_key_are_found(tmp_path: Path) -> None:
    old, same, unrelated = tmp_path / "old", tmp_path / "same", tmp_path / "unrelated"
    old.write_text(_hashed(tmp_path, f"gpu1 ssh-ed25519 {KEY}") + "\n")
    same.write_text("gpu1 ssh-ed25519 NEWKEY\n")
    unrelated.write_text(f"gpu2 ssh-ed25519 {KEY}\n")
    assert holding_other_key((old, same, unrelated, tmp_path / "missing"), "gpu1", "ssh-ed25519", "NEWKEY") == [old]
