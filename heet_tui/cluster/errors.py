"""Precise failures of the cluster layer, each mapping to one host state with a human message."""

from __future__ import annotations

from heet_tui.core.host import HostState


class ClusterError(Exception):
    """Base class; ``str()`` is a message fit to show a user."""


class HostNotReady(ClusterError):
    """A request for a host that is not ``ready`` (its state and message say why)."""


class UnknownHost(ClusterError):
    """A host name that is not in the hosts file."""


class AgentRequestError(ClusterError):
    """The agent refused or failed a request (bad arguments, job already running, fenced...)."""


class ConnectFailure(ClusterError):
    """Why a connection attempt failed; ``state`` is the host state it leads to."""

    state: HostState = HostState.UNREACHABLE


class Unreachable(ConnectFailure):
    state = HostState.UNREACHABLE


class AuthFailed(ConnectFailure):
    state = HostState.AUTH_FAILED


class HostKeyUnknown(ConnectFailure):
    """The server's host key is not in known_hosts (or differs from it); carries its fingerprint."""

    state = HostState.HOST_KEY_UNKNOWN

    def __init__(self, message: str, fingerprint: str = "", changed: bool = False) -> None:
        super().__init__(message)
        self.fingerprint = fingerprint
        self.changed = changed
        if changed:
            self.state = HostState.HOST_KEY_CHANGED


class AgentFailure(ConnectFailure):
    """The agent could not be deployed or started, or spoke something other than the protocol."""

    state = HostState.AGENT_ERROR
