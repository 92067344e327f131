"""Hosts as the domain sees them (the hosts file's SSH details live in ``heet_tui.config``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from heet_tui.core.gpu import Gpu


class HostState(StrEnum):
    """Connection state of a host's supervisor; every state carries a human message."""

    CONNECTING = "connecting"
    READY = "ready"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth-failed"
    HOST_KEY_UNKNOWN = "host-key-unknown"
    HOST_KEY_CHANGED = "host-key-changed"  # what a man-in-the-middle looks like: never shown as "unknown"
    AGENT_ERROR = "agent-error"

    @property
    def awaits_trust(self) -> bool:
        """Connecting waits on the user approving a host key (new, or different from the one trusted)."""
        return self in (HostState.HOST_KEY_UNKNOWN, HostState.HOST_KEY_CHANGED)


@dataclass(frozen=True, slots=True)
class Host:
    """A host that can run jobs: its GPUs, network locality and whether the user drained it."""

    name: str
    gpus: tuple[Gpu, ...] = ()
    rack: str = ""
    tags: tuple[str, ...] = ()
    drained: bool = False
    emulated_speed: float | None = None
    shared_fs: bool = True

    @property
    def gpu_type(self) -> str:
        """The host's GPU type; hosts are homogeneous (mixed hosts are split in the hosts file)."""
        return self.gpus[0].gpu_type if self.gpus else ""

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)
