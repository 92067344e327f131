"""The backend-on-a-thread adapter the app uses for the real controller.

Driven here with the demo backend (real simulator and scheduler), whose work must happen on
the adapter's thread while snapshots and answers arrive on the caller's loop.
"""

from __future__ import annotations

import asyncio
import threading

from ui_fakes import profile_dir

from heet_tui.control.demo_backend import DemoBackend
from heet_tui.control.threaded import ThreadedBackend
from heet_tui.core.intents import ApprovePlan, EditJob
from heet_tui.core.sched_input import Constraints


class RecordingDemo(DemoBackend):
    """Notes which thread each call runs on."""

    threads: set[str] = set()

    async def post(self, intent):
        RecordingDemo.threads.add(threading.current_thread().name)
        return await super().post(intent)

    async def preview(self, edit):
        RecordingDemo.threads.add(threading.current_thread().name)
        return await super().preview(edit)


def test_work_runs_on_the_backend_thread_and_snapshots_reach_the_caller(tmp_path):
    profiles = profile_dir(tmp_path)
    built_on: list[str] = []

    def factory() -> DemoBackend:
        built_on.append(threading.current_thread().name)
        return RecordingDemo(profiles=profiles, jobs=4, round_wall_s=0.01)

    async def scenario() -> None:
        backend = ThreadedBackend(factory, name="ctl-thread")
        await backend.start()
        try:
            stream = backend.snapshots()
            snap = await asyncio.wait_for(anext(stream), 30)
            while snap.plan_id is None:
                snap = await asyncio.wait_for(anext(stream), 30)
            job = snap.plan.changes[0].job_id
            effect = await backend.preview(EditJob(snap.plan_id, job, Constraints(pinned_type="T4", fixed_count=1)))
            assert effect.for_job(job) is not None
            assert f"plan #{snap.plan_id} applied" in await backend.post(ApprovePlan(snap.plan_id))
        finally:
            await backend.stop()

    asyncio.run(scenario())
    assert built_on == ["ctl-thread"]
    assert RecordingDemo.threads == {"ctl-thread"}


def test_a_factory_that_fails_is_reported_by_start():
    def factory():
        raise ValueError("hosts.toml:3: broken")

    async def scenario() -> None:
        backend = ThreadedBackend(factory)
        try:
            await backend.start()
        except ValueError as exc:
            return str(exc)
        return "no error"

    assert asyncio.run(scenario()) == "hosts.toml:3: broken"
