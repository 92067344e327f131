"""A state store that refuses writes (disk full): a clear error, no changes meanwhile, and on again after."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from control_lab import job, manual_controller, run_and_clean, wait_for, write_job, write_local_hosts

from heet_tui.config.hosts_file import load_hosts
from heet_tui.control.controller import Controller, ControllerOptions
from heet_tui.control.store import DB_NAME, Store, StoreWriteError
from heet_tui.control.store_schema import SCHEMA_VERSION
from heet_tui.core.intents import CancelJob, SubmitJob
from heet_tui.core.job import JobState
from heet_tui.core.snapshot import Snapshot


def _fill(store: Store) -> None:
    """The database may not grow: the next write that needs a page fails with SQLITE_FULL,
    as on a full disk."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    for size in (2000, 200, 20, 0):  # and what room is left in its pages is taken, to the last bytes
        with pytest.raises(StoreWriteError):
            for i in range(100_000):
                store.add_event(float(i), "filler", "x" * size)


def _free(store: Store) -> None:
    store._db.execute("PRAGMA max_page_count = 1073741823")


def test_a_refused_write_is_a_store_error_naming_the_store_and_why(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    _fill(store)
    with pytest.raises(StoreWriteError, match=r"state store .*state: cannot write \(database or disk is full\)"):
        store.add_event(1.0, "test", "x" * 2000)
    _free(store)
    store.add_event(1.0, "test", "fits again")
    assert store.events(limit=1)[0].message == "fits again"


async def _full_while_running(ctl: Controller, store: Store, root: Path, steps: int) -> Snapshot:
    """Job "a" submitted and running, then the store full: the snapshot that says so."""
    await ctl.start()
    await ctl.post(SubmitJob(str(write_job(root, "a", steps=steps, every=10))))
    await wait_for(ctl, lambda s: job(s, "a").state is JobState.RUNNING, 60, "a running")
    _fill(store)
    return await wait_for(ctl, lambda s: any("makes no changes" in n for n in s.notices), 60, "the notice")


def test_the_controller_changes_nothing_while_it_cannot_write_and_goes_on_after(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        try:
            snap = await _full_while_running(ctl, store, tmp_path, 300)
            assert "cannot write (database or disk is full)" in next(n for n in snap.notices if "no changes" in n)
            assert ctl.store_health.error is not None
            # said as long as it lasts (the TUI's header): a toast faded, and the screen looked live
            assert "cannot write (database or disk is full)" in snap.store_error
            # a refusal, said as one: it read "failed: cancel a: StoreWriteError: state store ..."
            with pytest.raises(ValueError, match=r"cannot write \(database or disk is full\): refused while the "
                                                 "state store takes no writes"):
                await ctl.post(CancelJob("a"))
            log = (store.dir / "controller.log").read_text()  # its "cancel requested" event was logged first
            assert "CancelJob refused: state store" in log
            await asyncio.sleep(1.0)  # rounds and events skipped, not a traceback each
            _free(store)
            snap = await wait_for(ctl, lambda s: any("takes writes again" in n for n in s.notices), 30, "writable")
            assert snap.store_error == ""
            await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 120, "a done")
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    assert any("writable again" in e.message for e in store.events(limit=200))
    log = store.dir / "controller.log"  # what a TUI user never saw on the terminal it owns
    assert "ERROR heet_tui.control.store_health: state store" in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600
    assert not [h for h in logging.getLogger("heet_tui").handlers if getattr(h, "baseFilename", "") == str(log)], \
        "the stopped controller took its log file handler away"


def test_a_job_that_ends_while_the_store_is_full_is_recorded_once_it_takes_writes(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        try:
            await _full_while_running(ctl, store, tmp_path, 200)
            for _ in range(600):  # the job's exit, reported by its agent, is an event nobody could record
                if any(r.job_id.startswith("a.r0") and not r.running and r.exit_code == 0
                       for r in ctl.cluster.jobs("only")):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the job did not end while the store was full")
            _free(store)
            snap = await wait_for(ctl, lambda s: job(s, "a").state is JobState.DONE, 60, "a done")
            assert job(snap, "a").progress == 1.0
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    said = [e.message for e in store.events(limit=50) if e.job_id == "a"]
    launches = [m for m in said if m.startswith("a generation ") and " on only[0]" in m]
    assert len(launches) == 1, f"a finished job is not launched again: {said}"
    assert f"{launches[0].split(':')[0]}: target reached" in said, said
    log = (store.dir / "controller.log").read_text()  # the story a user is sent to read, there too
    assert f"INFO heet_tui.events: launch: {launches[0]}" in log
    assert f"INFO heet_tui.events: done: {launches[0].split(':')[0]}: target reached" in log


def test_a_store_another_process_is_writing_to_opens_for_reading_at_once(tmp_path: Path) -> None:
    Store(tmp_path / "state").close()
    writer = sqlite3.connect(tmp_path / "state" / DB_NAME, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as a controller mid-write, or a disk with no room for a write
    try:
        reader = Store(tmp_path / "state")  # what heet-tui jobs, status and log open
        assert reader.jobs() == [] and reader.schema_version == SCHEMA_VERSION
    finally:
        writer.execute("ROLLBACK")


def test_submit_on_a_full_disk_says_so_and_a_non_utf8_file_name_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Both ended in a Python traceback (jobs and status already said the first clearly)."""
    import os

    from heet_tui.cli.main import main

    spec = write_job(tmp_path, "a", steps=10)
    state = ["--state", str(tmp_path / "state")]

    def full(self, *args, **kwargs):
        raise StoreWriteError(f"state store {self.dir}: cannot write (database or disk is full)")

    with monkeypatch.context() as m:
        m.setattr(Store, "add_jobs", full)
        assert main([*state, "submit", str(spec)]) == 1
    assert "cannot write (database or disk is full)" in capsys.readouterr().err
    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe.toml")
    Path(odd).write_text(spec.read_text())
    assert main([*state, "submit", odd]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err


def test_a_damaged_store_is_refused_before_any_host_is_touched(tmp_path: Path) -> None:
    """On a store with one bad page the controller auto-approved a plan, launched its jobs, and only
    then failed ("database disk image is malformed"), leaving them running, known to no store."""
    import asyncio

    from heet_tui.control.store import StoreError

    store = Store(tmp_path / "state")
    for i in range(3000):
        store.add_event(float(i), "filler", f"event {i} " + "x" * 200)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    with open(tmp_path / "state" / DB_NAME, "r+b") as fh:  # one page of the events table overwritten
        fh.seek(40 * 4096)
        fh.write(b"\xa5" * 4096)
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))

    async def scenario() -> None:
        ctl = Controller(hosts, Store(tmp_path / "state"), ControllerOptions(interval_s=0.2))
        try:
            with pytest.raises(StoreError, match=r"is damaged \(.*\): the controller does not start on it"):
                await ctl.start()
            assert not (tmp_path / "w-only").exists(), "no agent was started on the host"
        finally:
            await ctl.stop()

    asyncio.run(scenario())


def _damaged_under_the_controller(tmp_path: Path, damage: Callable[[Store], object], said: str) -> tuple[str, bool]:
    """Damage the store once the controller runs; its notice that says ``said``, and whether it
    still takes the store for writable after it."""
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))
    store = Store(tmp_path / "state")
    seen: list[tuple[str, bool]] = []

    async def scenario() -> None:
        ctl = Controller(hosts, store, ControllerOptions(interval_s=0.2, auto_approve=True, profile=False))
        await ctl.start()
        try:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].state.value == "ready", 30, "host ready")
            damage(store)
            snap = await wait_for(ctl, lambda s: any(said in n for n in s.notices), 30, "the notice")
            seen.append((snap.notices[-1], ctl.store_health.writable()))
        finally:
            await ctl.stop()

    run_and_clean(scenario, tmp_path)
    return seen[0]


def test_a_state_directory_deleted_under_the_controller_stops_its_changes_loudly(tmp_path: Path) -> None:
    """Deleted while it ran, the controller went on recording into the deleted file with no word,
    while `jobs` showed an empty new store and `submit` filled it."""
    import shutil

    notice, writable = _damaged_under_the_controller(tmp_path, lambda store: shutil.rmtree(store.dir),
                                                     "was deleted while")
    assert "records and changes nothing from now on" in notice
    assert not writable, "and it stays so"


def test_a_store_emptied_under_the_controller_stops_its_changes_loudly(tmp_path: Path) -> None:
    """`truncate -s 0 state.sqlite3` while it ran: the file kept its inode, and the controller
    went on for minutes with no word, its writes going into the write-ahead log only."""
    import os

    notice, _ = _damaged_under_the_controller(tmp_path, lambda store: os.truncate(store.path, 0),
                                              "was emptied (0 bytes) while")
    assert "records and changes nothing from now on" in notice


def test_a_store_emptied_to_zero_bytes_is_refused_not_started_afresh(tmp_path: Path, capsys) -> None:
    """Seen: state.db truncated to 0 bytes; `heet-tui jobs` printed an empty queue and the next
    controller began a new store over it, its running jobs shown as another store's."""
    import os
    import time

    from heet_tui.cli.main import main

    store = Store(tmp_path / "state")
    store.add_event(1.0, "filler", "kept")
    store.close()
    db = tmp_path / "state" / DB_NAME
    for leftover in db.parent.glob(DB_NAME + "-*"):
        leftover.unlink()  # no WAL to recover from: the store is gone, only its file name is left
    db.write_bytes(b"")
    os.utime(db, (time.time() - 60, time.time() - 60))
    assert main(["jobs", "--state", str(tmp_path / "state")]) == 1
    err = capsys.readouterr().err
    assert f"state store {db} is empty (0 bytes)" in err and "Restore a copy" in err, err
    assert db.stat().st_size == 0, "nothing written over it"
    os.utime(db)  # just made by another process opening a new store: that is not refused
    Store(tmp_path / "state").close()


@pytest.mark.parametrize("damage", ["pages", "cut"])
def test_a_damaged_store_is_named_with_the_way_out_by_every_command(tmp_path: Path, capsys, damage: str) -> None:
    """`jobs` and `submit` printed a traceback ending in "database disk image is malformed", and
    a store cut short said only "state store std: file is not a database"."""
    from heet_tui.cli.main import main
    from heet_tui.core.job import JobSpec, Target, TargetKind

    store = Store(tmp_path / "state")
    for i in range(300):
        store.add_job(JobSpec(f"job-{i}", ("python3", "t.py", "x" * 200), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    db = tmp_path / "state" / DB_NAME
    with open(db, "r+b") as fh:
        if damage == "pages":
            fh.seek(3 * 4096)
            fh.write(b"\xa5" * 8 * 4096)
        else:
            fh.truncate(10000)
    spec = tmp_path / "j.toml"
    spec.write_text('name = "j"\ncommand = ["python3", "t.py"]\nmodel = "m"\nbatch_size = 8\ntarget = { steps = 1 }\n')
    for argv in (["jobs"], ["submit", str(spec)]):
        assert main(["--state", str(tmp_path / "state"), *argv]) == 1, argv
        err = capsys.readouterr().err
        assert f"state store {db} is damaged (" in err and f"mv {db.parent} {db.parent}.damaged" in err, (argv, err)
        assert "Traceback" not in err


def test_a_store_that_could_not_be_set_up_leaves_nothing_to_refuse_later(tmp_path: Path, monkeypatch) -> None:
    """A first submit on a full disk left a 0-byte store, and every later command, the disk freed,
    refused it as "truncated: restore a copy" (of a store that never held anything)."""
    from heet_tui.control.store import StoreError

    real_connect = sqlite3.connect

    def full(*args, **kwargs):  # sqlite made the file and could write nothing into it
        real_connect(*args, **kwargs).close()
        raise sqlite3.OperationalError("database or disk is full")

    state = tmp_path / "state"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite3, "connect", full)
        with pytest.raises(StoreError, match="database or disk is full"):
            Store(state)
    assert not (state / DB_NAME).exists()
    store = Store(state)
    assert store.jobs() == [], "the disk freed, the store is made"
    store.close()


def test_a_store_on_a_disk_that_refuses_writes_is_read_as_last_written(tmp_path: Path) -> None:
    """With no controller running (its write-ahead log gone), `jobs`, `status` and the TUI all
    failed with "disk I/O error": SQLite could not make the log beside the store to open it."""
    import subprocess
    import sys

    from heet_tui.cli.main import main

    spec = write_job(tmp_path, "kept", steps=10, max_gpus=1)
    submitted = subprocess.run([sys.executable, "-m", "heet_tui.cli.main", "submit", str(spec), "--state",
                                str(tmp_path / "state")], capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    assert not (tmp_path / "state" / f"{DB_NAME}-wal").exists(), "a clean close leaves no log"
    # a process that may create no file content (RLIMIT_FSIZE 0), as on a full disk: SQLite cannot
    # size its shared-memory file; everything it imports is loaded first
    refusing = ("import resource, signal, sys\nfrom heet_tui.cli.main import build_parser, main\nbuild_parser()\n"
                "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nresource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n"
                "sys.exit(main(sys.argv[1:]))\n")

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", refusing, *argv, "--state", str(tmp_path / "state")],
                              capture_output=True, text=True, timeout=120)

    listed = cli("jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [j["id"] for j in json.loads(listed.stdout)["jobs"]] == ["kept"]
    assert "cannot be written (disk I/O error; its disk refuses writes: shown as last written" in listed.stderr
    refused = cli("submit", str(spec))
    assert refused.returncode == 1 and "cannot write (disk I/O error; its disk refuses writes" in refused.stderr
    assert main(["jobs", "--json", "--state", str(tmp_path / "state")]) == 0  # and as before once it takes writes
    assert [r.job.id for r in Store(tmp_path / "state").jobs()] == ["kept"], "nothing lost, nothing added"


def test_an_idle_controller_that_refuses_a_request_says_the_outage_as_a_busy_one_does(tmp_path: Path,
                                                                                      capsys) -> None:
    """Nothing running, nothing written since the disk filled: a refused approve said so to its
    asker, while status, plan show and the TUI's header went on as if all were well."""
    store = Store(tmp_path / "state")
    hosts = load_hosts(write_local_hosts(tmp_path, [("only", "A100", 1, 1.0)]))

    async def scenario() -> None:
        async with manual_controller(hosts, store) as ctl:
            await wait_for(ctl, lambda s: s.hosts and s.hosts[0].gpus, 60, "the host up")
            _fill(store)
            with pytest.raises(ValueError, match="refused while the state store takes no writes"):
                await ctl.post(SubmitJob(str(write_job(tmp_path, "a", steps=10))))
            await wait_for(ctl, lambda s: "cannot write (database or disk is full)" in s.store_error, 30,
                           "the outage said in every snapshot")
            from heet_tui.cli.main import main  # status says it at the top, not as a notice at the bottom

            assert await asyncio.to_thread(main, ["status", "--state", str(store.dir)]) == 0
            lines = capsys.readouterr().out.splitlines()
            assert lines[1].startswith("store       state store") and "changes nothing until it can write" in lines[1]
            assert await asyncio.to_thread(main, ["plan", "show", "--state", str(store.dir)]) == 0
            assert "cannot write (database or disk is full): the controller changes nothing" in capsys.readouterr().err
            _free(store)
            await wait_for(ctl, lambda s: s.store_error == "", 30, "writable again")

    run_and_clean(scenario, tmp_path)
