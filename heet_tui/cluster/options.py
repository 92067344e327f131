"""Tunables of the cluster layer, with defaults that suit a few hundred hosts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def default_known_hosts() -> Path:
    """Where ``trust_host`` records keys when the SSH config names no known_hosts file."""
    import os

    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "heet-tui" / "known_hosts"


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    max_connects: int = 64  # connection attempts (connect + deploy + handshake) in flight at once
    connect_timeout_s: float = 15.0
    request_timeout_s: float = 30.0
    heartbeat_s: float = 2.0  # asked of the agent
    heartbeat_timeout_s: float = 10.0  # no message for this long: the link is dead
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    keepalive_s: float = 5.0
    probes: tuple[str, ...] = ("nvml", "nvidia-smi")  # GPU sources the agent tries (declared emulation wins)
    gpu_read_limit_s: float = 5.0  # an nvidia-smi that takes longer while the agent runs has hung (Xid 79)
    fallback_known_hosts: Path | None = None  # default: default_known_hosts()
    check_only: bool = False  # agents that report hosts only, beside a controller's (hosts check)
    owner: str = ""  # the controller's state-store id: an agent of another controller is not taken over
    session: str = ""  # this controller run's: one on a copy of the store is not taken over either
    previous_session: str = ""  # the run this one succeeds (control/sessions.py): its agents are taken at once
    # " --hosts FILE" in the "heet-tui hosts trust NAME" a host's message suggests, where the hosts file is
    # not the one that command finds by itself (pasted, it said 'no host named "hb"')
    trust_hosts_option: str = ""

    def known_hosts_fallback(self) -> Path:
        return self.fallback_known_hosts or default_known_hosts()

    def backoff_s(self, attempt: int, jitter: float) -> float:
        """The wait before reconnect ``attempt``: doubling up to the cap, times a ``jitter`` in
        [0.5, 1] so that hosts lost together retry apart."""
        return min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1)) * jitter
