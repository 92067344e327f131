"""Two controllers on copies of one state directory (a backup restored beside the original,
``cp -r``): both name the same store, and each took every host from the other at every reconnect,
each counting the other's jobs lost."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from control_lab import run_and_clean, wait_for, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import Store
from heet_tui.core.host import HostState


def test_a_controller_on_a_copy_of_the_state_is_refused_and_takes_over_once_the_original_stops(
        tmp_path: Path) -> None:
    path = write_local_hosts(tmp_path, [("one", "T4", 1, 1.0)])
    original = Store(tmp_path / "state")
    store_id = original.store_id
    original.close()
    shutil.copytree(tmp_path / "state", tmp_path / "state-copy")
    copy = Store(tmp_path / "state-copy")
    assert copy.store_id == store_id, "the copy names the same store"

    async def scenario() -> None:
        first = Controller(load_hosts(path), Store(tmp_path / "state"), ControllerOptions(interval_s=0.2))
        second = Controller(load_hosts(path), copy, ControllerOptions(interval_s=0.2))
        await first.start()
        try:
            await wait_for(first, lambda s: [h.state for h in s.hosts] == [HostState.READY], 30, "first ready")
            await second.start()
            snap = await wait_for(second, lambda s: s.hosts[0].state is HostState.AGENT_ERROR, 30,
                                  "the copy's controller refused")
            assert "another heet-tui controller of the same state store (a copy" in snap.hosts[0].message
            await asyncio.sleep(1.5)  # the second retries meanwhile; the first must not lose the host
            await first.publish()
            assert first.hub.latest.hosts[0].state is HostState.READY
            assert not any("lost" in e.message or "out" in e.kind for e in first.store.events(limit=100))
        finally:
            await first.stop()
        try:  # the original stopped: its agent saw the link close, and the copy's controller is not held up
            await wait_for(second, lambda s: s.hosts[0].state is HostState.READY, 60, "the copy's controller ready")
        finally:
            await second.stop()

    run_and_clean(scenario, tmp_path)


def test_a_restored_backup_leaves_the_newer_copys_jobs_running(tmp_path: Path) -> None:
    """Seen: the controller stopped for an upgrade, then run on a backup of its state taken before
    a job was submitted: it fenced that job ("stopped stale late generation 1"), six jobs at once
    on another try, as processes of its own store that it did not know."""
    import sqlite3

    from control_lab import job, write_job

    from heet_tui.control.snapshot_build import OTHER_STORE
    from heet_tui.control.store import DB_NAME
    from heet_tui.core.intents import SubmitJob
    from heet_tui.core.job import JobState

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 2, 1.0)]))
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)
    (tmp_path / "backup").mkdir(mode=0o700)

    async def scenario() -> None:
        first = Controller(hosts, Store(tmp_path / "state"), options)
        await first.start()
        try:
            await first.post(SubmitJob(str(write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(first, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            with sqlite3.connect(tmp_path / "state" / DB_NAME) as src, \
                    sqlite3.connect(tmp_path / "backup" / DB_NAME) as dst:
                src.backup(dst)  # the backup knows a, not what comes next
            await first.post(SubmitJob(str(write_job(tmp_path, "late", steps=100_000, max_gpus=1, every=1000))))
            await wait_for(first, lambda s: job(s, "late").state is JobState.RUNNING, 60, "late running")
        finally:
            await first.stop()  # jobs keep running on their hosts
        backup = Store(tmp_path / "backup")
        second = Controller(hosts, backup, options)
        await second.start()
        try:
            snap = await wait_for(second, lambda s: any("which this state store never launched" in n
                                                        for n in s.notices), 30, "the newer copy's job said")
            assert "late.r0." in next(n for n in snap.notices if "never launched" in n)
            await asyncio.sleep(2.0)  # rounds go by
            late = [j for j in second.cluster.jobs("h") if j.job_id.startswith("late.r0.")]
            assert late and late[0].running, "the newer copy's job runs on"
            assert not [e for e in backup.events(limit=200) if e.kind == "fence"], "nothing fenced"
            assert job(second.hub.latest, "a").state is JobState.RUNNING, "what both copies know is adopted"
            (status,) = second.hub.latest.hosts
            assert sorted(who for _, who in status.gpu_jobs) == sorted(["a", OTHER_STORE]), "plans keep off its GPU"
        finally:
            await second.stop()
    run_and_clean(scenario, tmp_path)


def test_a_backup_never_reuses_a_generation_a_newer_copy_ran(tmp_path: Path) -> None:
    """Seen: the original ran a job's generation 2 while its backup knew generation 1. The backup's
    controller left that run alone, then launched its own generation 2; at its next restart it read
    the other's finished generation 2 as its own, made the job done and stopped its own run."""
    import os
    import signal
    import sqlite3

    from control_lab import job, write_job

    from heet_tui.control.newer_copies import remembered
    from heet_tui.control.recovery import judge_reported
    from heet_tui.control.store import DB_NAME
    from heet_tui.core.intents import SubmitJob, UpdateJobs
    from heet_tui.core.job import JobState

    hosts = load_hosts(write_local_hosts(tmp_path, [("h", "T4", 2, 1.0)]))
    options = ControllerOptions(interval_s=0.2, auto_approve=True, profile=False)
    (tmp_path / "backup").mkdir(mode=0o700)
    spec = write_job(tmp_path, "a", steps=100_000, max_gpus=1, every=1000)

    async def scenario() -> None:
        first = Controller(hosts, Store(tmp_path / "state"), options)
        await first.start()
        try:
            await first.post(SubmitJob(str(spec)))
            await wait_for(first, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
            with sqlite3.connect(tmp_path / "state" / DB_NAME) as src, \
                    sqlite3.connect(tmp_path / "backup" / DB_NAME) as dst:
                src.backup(dst)  # the backup knows a's generation 1
            spec.write_text(spec.read_text().replace("steps = 100000", "steps = 90000"))
            await first.post(UpdateJobs(str(spec)))  # relaunched in place: generation 2
            await wait_for(first, lambda s: first.store.job("a").generation == 2
                           and job(s, "a").state is JobState.RUNNING, 60, "a's generation 2 running")
        finally:
            await first.stop()
        backup = Store(tmp_path / "backup")
        second = Controller(hosts, backup, options)
        await second.start()
        try:
            await wait_for(second, lambda s: any("a.r0." in n and "never launched" in n for n in s.notices), 30,
                           "the newer copy's generation said")
            assert ("a", 2) in remembered(backup)
            await asyncio.sleep(1.5)
            assert backup.job("a").generation == 1, "not run twice: the newer copy runs it"
            # and it says so: it read "stopped by a SIGTERM ... resumes from its checkpoint", for good
            assert backup.job("a").job.message.startswith("held: a newer copy of this state store runs it")
            (other,) = [j for j in second.cluster.jobs("h") if j.job_id.startswith("a.r0.") and j.running]
            os.killpg(other.pid, signal.SIGKILL)  # the newer copy's run ends (its controller stopped it)
            await wait_for(second, lambda s: backup.job("a").generation >= 3, 90, "the backup's own launch of a")
            reported = [j for j in second.cluster.jobs("h") if j.job_id.startswith("a.r0.") and j.generation == 2]
            verdicts = judge_reported(second.executor, backup, "h", tuple(reported))
            assert [v.action for v in verdicts] == ["newer-ended"], "never read as this store's run at a restart"
            said = [e for e in backup.events(job_id="a", limit=100)]
            launches = [e.message for e in said if e.kind == "launch"]
            assert launches[-1].startswith("a generation 3:"), "past the other's generation 2"
            assert not [m for m in launches if m.startswith("a generation 2")], launches
            assert not [e.message for e in said if "refused" in e.message], "no launch into the other's generation"
        finally:
            await second.stop()

    run_and_clean(scenario, tmp_path)


def test_a_run_succeeds_the_last_one_only_once_that_process_is_gone(tmp_path: Path) -> None:
    """A restart after a network cut was refused by the old agent, whose half-open link outlived
    its controller; a run on the same machine whose predecessor's process is gone names it, and
    the agents let it in at once. A copy started while the original runs finds it alive."""
    import json
    import subprocess
    import sys

    from heet_tui.control.sessions import SETTING, succeed

    store = Store(tmp_path / "state")
    assert succeed(store, "first") == "", "nothing came before"
    assert succeed(store, "second") == "", "the first run's process (this one) is alive: a copy claims nothing"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = json.loads(store.setting(SETTING))
    store.set_setting(SETTING, json.dumps(record | {"pid": int(gone.stdout)}))  # that run's process has ended
    assert succeed(store, "third") == "second"
    store.set_setting(SETTING, json.dumps(record | {"pid": int(gone.stdout), "host": "another-login-node"}))
    assert succeed(store, "fourth") == "", "another machine's process cannot be checked: no claim"
