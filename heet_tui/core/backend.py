"""The one seam between the UI and whatever drives it (the real controller or the demo sim)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import Snapshot


class Backend(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def snapshots(self) -> AsyncIterator[Snapshot]:
        """Latest-first stream: a slow consumer skips stale snapshots, never blocks the producer."""
        ...

    async def post(self, intent: Intent) -> str:
        """Carry out an intent; returns a short human result. Raises ``ValueError`` with a message."""
        ...

    async def preview(self, edit: EditJob) -> PredictedEffect:
        """Re-evaluate the pending plan with one job tweaked, without applying anything."""
        ...

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        """The last lines a rank (default 0) of the job's latest run (or of ``generation``) wrote, a header
        line first."""
        ...
