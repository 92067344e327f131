"""Real OpenSSH ``sshd`` servers on loopback, for the tests and ``heet-tui bench connect``.

Lives in the package (not only under tests/) because the benchmark ships with heet-tui;
tests import it as ``support.sshd``.

``SshLab`` makes a temporary world: one user key pair, a known_hosts and an ssh_config that
use it, and any number of sshd processes (127.0.0.2, .3, ... each on its own free port) with
their own host keys, running as the current user. Servers are stopped by pid. ``kill()``
also kills the server's per-connection sshd processes (as a crashed or rebooted host would),
but not the processes started through them: jobs survive, as they would a network cut.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None


def _keygen(path: Path) -> str:
    """A fresh key at ``path``: one left there by an earlier lab is replaced (ssh-keygen asked
    whether to overwrite it, on a stdin nobody answered, and the lab hung)."""
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Path(f"{path}.pub").read_text().strip()


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = data[data.index("(") + 1:data.rindex(")")]
        ppid = int(data[data.rindex(")") + 2:].split()[1])
        if ppid == pid:
            found.append((int(entry), comm))
    return found


def _sshd_tree(pid: int) -> list[int]:
    """``pid`` and every sshd below it (not the shells and agents those sshd processes run)."""
    tree, todo = [pid], [pid]
    while todo:
        for child, comm in _children(todo.pop()):
            if comm.startswith("sshd"):
                tree.append(child)
                todo.append(child)
    return tree


@dataclass
class SshdServer:
    name: str
    address: str
    port: int
    root: Path
    authorized_keys: Path
    sftp: bool = True
    host_key: Path = field(init=False)
    host_public: str = field(init=False)
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.host_key = self.root / "ssh_host_ed25519_key"
        self.host_public = _keygen(self.host_key)
        self.workdir = self.root / "work"
        self.home = self.root / "home"

    @property
    def known_hosts_line(self) -> str:
        kind, blob = self.host_public.split()[:2]
        return f"[{self.address}]:{self.port} {kind} {blob}"

    def _config(self) -> Path:
        lines = [
            f"Port {self.port}", f"ListenAddress {self.address}", f"HostKey {self.host_key}",
            f"PidFile {self.root / 'sshd.pid'}", f"AuthorizedKeysFile {self.authorized_keys}",
            "PermitRootLogin yes", "StrictModes no", "UsePAM no", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PubkeyAuthentication yes", "PrintMotd no",
            "LogLevel ERROR", "MaxStartups 200", "MaxSessions 50",
        ]
        # Each host gets its own home: the login shell must not source this machine's ~/.bashrc
        # (here it runs `pyenv init`, 0.3 s of CPU per session), and `~` differs per host, as it would.
        self.home.mkdir(parents=True, exist_ok=True)
        lines.append(f"SetEnv HOME={self.home}")
        if self.sftp:
            lines.append(f"Subsystem sftp internal-sftp -d {self.home}")
        path = self.root / "sshd_config"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 10.0) -> None:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege-separation dir sshd insists on
        log = open(self.root / "sshd.log", "ab")
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self._config())], stdout=log, stderr=log,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd {self.name} exited: {(self.root / 'sshd.log').read_text()[-500:]}")
            try:
                with socket.create_connection((self.address, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"sshd {self.name} did not listen on {self.address}:{self.port}")

    def kill(self) -> None:
        """The host vanishes: SIGKILL the server and its connection processes."""
        if self.process is None:
            return
        for pid in reversed(_sshd_tree(self.process.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        self.kill()


@dataclass
class SshLab:
    root: Path
    servers: list[SshdServer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.user_key = self.root / "id_user"
        self.user_public = _keygen(self.user_key)
        self.authorized_keys = self.root / "authorized_keys"
        self.authorized_keys.write_text(self.user_public + "\n")
        self.known_hosts = self.root / "known_hosts"
        self.known_hosts.write_text("")
        self.ssh_config = self.root / "ssh_config"
        self.write_ssh_config(self.user_key)

    def write_ssh_config(self, identity: Path, extra: str = "") -> None:
        self.ssh_config.write_text(
            f"{extra}Host *\n  User {os.environ.get('USER') or 'root'}\n  IdentityFile {identity}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n")

    def add_host(self, name: str, sftp: bool = True, trusted: bool = True, start: bool = True) -> SshdServer:
        address = f"127.0.0.{2 + len(self.servers) % 250}"
        server = SshdServer(name, address, free_port(address), self.root / name, self.authorized_keys, sftp)
        self.servers.append(server)
        if trusted:
            with open(self.known_hosts, "a") as fh:
                fh.write(server.known_hosts_line + "\n")
        if start:
            server.start()
        return server

    def server(self, name: str) -> SshdServer:
        return next(s for s in self.servers if s.name == name)

    def hosts_toml(self, hosts: list[dict[str, object]], python: str | None = None) -> Path:
        """Write a hosts file for ``hosts`` (dicts of hosts-file keys) using this lab's ssh_config."""
        py = python or (shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
        out = [f'[defaults]\nssh_config = "{self.ssh_config}"\npython = "{py}"\n']
        for host in hosts:
            out.append("[[hosts]]")
            for key, value in host.items():
                if isinstance(value, dict):
                    inner = ", ".join(f"{k} = {_toml(v)}" for k, v in value.items())
                    out.append(f"{key} = {{ {inner} }}")
                else:
                    out.append(f"{key} = {_toml(value)}")
            out.append("")
        path = self.root / "hosts.toml"
        path.write_text("\n".join(out))
        return path

    def entry_for(self, server: SshdServer, **extra: object) -> dict[str, object]:
        return {"name": server.name, "address": server.address, "port": server.port,
                "workdir": str(server.workdir), **extra}

    def close(self) -> None:
        for server in self.servers:
            server.stop()


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def kill_jobs_under(workdir: Path) -> None:
    """Test cleanup: SIGKILL job process groups recorded in an agent's state file."""
    import json

    jobs = []
    for state in [workdir / "agent-state.json", *workdir.glob("hosts/*/agent-state.json")]:
        try:
            jobs += json.loads(state.read_text()).get("jobs", [])
        except (OSError, ValueError):
            continue
    for job in jobs:
        if job.get("state") != "exited":
            try:
                os.killpg(int(job["pgid"]), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, KeyError, ValueError):
                pass
