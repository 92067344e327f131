"""Every cross-widget message of the app, as small dataclasses (the toolong layout).

``SnapshotArrived`` is replaceable: when the backend publishes faster than the screen can
draw, queued snapshots collapse into the newest one instead of piling up behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from heet_tui.core.intents import Intent
from heet_tui.core.snapshot import Snapshot


@dataclass
class SnapshotArrived(Message):
    """A new complete snapshot from the backend; older queued ones are dropped."""

    snapshot: Snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotArrived)


@dataclass
class BackendFailed(Message):
    """The backend stream ended or failed; the app keeps the last snapshot and says why."""

    reason: str


@dataclass
class IntentRequested(Message):
    """A screen or dialog asks the app to send ``intent`` to the backend (off the event loop)."""

    intent: Intent
    describe: str = ""


@dataclass
class IntentDone(Message):
    """The backend answered an intent; ``error`` is set when it refused or failed."""

    intent: Intent
    result: str = ""
    error: str = ""


@dataclass
class HostHighlighted(Message):
    host: str


@dataclass
class JobHighlighted(Message):
    job_id: str
