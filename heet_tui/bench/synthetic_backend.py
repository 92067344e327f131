"""A Backend that publishes synthetic snapshots: for the UI benchmark and for looking at big clusters.

It implements the Backend protocol honestly (a latest-first stream that never blocks on a slow
consumer); intents are acknowledged and change nothing, since the data is synthetic.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from heet_tui.bench.synthetic_snapshot import SyntheticCluster
from heet_tui.core.intents import EditJob, Intent
from heet_tui.core.plan import PredictedEffect
from heet_tui.core.snapshot import Snapshot


class SyntheticBackend:
    def __init__(self, cluster: SyntheticCluster, interval_s: float = 0.5, steps: int | None = None) -> None:
        self.cluster, self.interval_s, self.steps = cluster, interval_s, steps
        self._latest: asyncio.Queue[Snapshot] = asyncio.Queue(maxsize=1)
        self._task: asyncio.Task[None] | None = None
        self.frames: list[Snapshot] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # Building a 2,000-job snapshot takes tens of ms: do it once per step in a thread, ahead of time.
        count = self.steps if self.steps is not None else 20
        self.frames = await loop.run_in_executor(None, lambda: [self.cluster.snapshot(s) for s in range(count)])
        self._task = asyncio.create_task(self._publish())

    async def _publish(self) -> None:
        step = 0
        while self.steps is None or step < self.steps:
            snap = self.frames[step % len(self.frames)]
            if self._latest.full():
                self._latest.get_nowait()  # latest-first: drop the stale one
            self._latest.put_nowait(snap)
            step += 1
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        while True:
            yield await self._latest.get()

    async def post(self, intent: Intent) -> str:
        return f"synthetic data: {type(intent).__name__} acknowledged, nothing changes"

    async def preview(self, edit: EditJob) -> PredictedEffect:
        return PredictedEffect()

    async def job_log(self, job_id: str, lines: int = 200, rank: int = 0,
                      generation: int | None = None) -> tuple[str, ...]:
        return ()
