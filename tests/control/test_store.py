"""The SQLite state store: life cycle, plans and steps, allocations, privacy, concurrent writers."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from heet_tui.control.store import SCHEMA_VERSION, Store, StoreError
from heet_tui.core.allocation import Allocation
from heet_tui.core.job import InvalidTransition, JobSpec, JobState, Target, TargetKind
from heet_tui.core.plan import Plan


def _spec(name: str = "cnn") -> JobSpec:
    return JobSpec(name, ("python3", "train.py"), "cifar10", 64, Target(TargetKind.STEPS, 100), max_gpus=4,
                   env=(("A", "b"),), gpu_types=("T4",))


def test_files_are_private_and_schema_is_versioned(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert store.schema_version == SCHEMA_VERSION
    store.close()
    db = sqlite3.connect(tmp_path / "state" / "state.sqlite3")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this heet-tui"):
        Store(tmp_path / "state")


def test_a_state_path_that_is_a_file_is_refused_saying_so(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="is not a directory"):
        Store(tmp_path / "f")


def test_each_state_directory_has_its_own_lasting_id(tmp_path: Path) -> None:
    first = Store(tmp_path / "one").store_id
    assert Store(tmp_path / "one").store_id == first  # reopened: the same store
    assert Store(tmp_path / "two").store_id != first and len(first) == 32


def test_ids_stay_unique_when_a_name_looks_like_a_suffixed_id(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids = [store.add_job(_spec(name), float(i)).id for i, name in enumerate(["cnn-2", "cnn", "cnn"])]
    assert ids == ["cnn-2", "cnn", "cnn-3"]  # the second "cnn" used to collide with "cnn-2"


def test_job_life_cycle_and_unique_ids(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.add_job(_spec(), 1.0)
    b = store.add_job(_spec(), 2.0)
    assert (a.id, b.id) == ("cnn", "cnn-2")
    assert store.job("cnn").job.spec == _spec(), "the spec round-trips exactly"
    store.set_state("cnn", JobState.RUNNING, 3.0, "launched")
    store.set_state("cnn", JobState.RESIZING, 4.0)
    store.set_state("cnn", JobState.RUNNING, 5.0)
    store.set_state("cnn", JobState.DONE, 6.0)
    with pytest.raises(InvalidTransition):
        store.set_state("cnn", JobState.RUNNING, 7.0)
    rec = store.job("cnn")
    assert rec.job.restarts == 1
    assert [s for _, s in rec.job.history] == [JobState.QUEUED, JobState.RUNNING, JobState.RESIZING,
                                               JobState.RUNNING, JobState.DONE]
    assert [r.job.id for r in store.jobs(include_terminal=False)] == ["cnn-2"]
    assert store.find_job("cnn").job.id == "cnn"
    store.update_progress("cnn-2", 50, 3200, "/ck/x.pt")
    store.update_progress("cnn-2", 40, 2560, None)  # a late, older report never moves progress back
    rec = store.job("cnn-2")
    assert (rec.job.steps_done, rec.job.samples_done, rec.checkpoint) == (50, 3200, "/ck/x.pt")
    assert [store.next_generation("cnn-2") for _ in range(3)] == [1, 2, 3]


def test_plans_steps_and_allocations_survive_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add_job(_spec(), 0.0)
    alloc = Allocation.of("cnn", "T4", {"h2": [1, 0], "h1": [3]})
    plan = Plan.build({}, {"cnn": alloc}, "heet", 10.0)
    pid = store.add_plan(plan)
    second = store.add_plan(plan)
    assert store.plan(pid).status == "superseded" and store.plan(second).status == "proposed"
    store.start_applying(second, plan.changes, 11.0)
    store.mark_step(second, 0, "running", 12.0)
    store.record_allocation(alloc, 1, 12.0)
    store.close()

    again = Store(tmp_path)
    rec = again.plan(second)
    assert rec.status == "applying" and rec.plan.allocations == {"cnn": alloc}
    assert [(s.idx, s.status, s.change.after) for s in again.steps(second)] == [(0, "running", alloc)]
    assert again.current_allocations() == {"cnn": (alloc, 1)}
    again.release_allocation("cnn", 13.0)
    assert again.current_allocations() == {}


def test_second_process_writes_while_first_reads(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.add_job(_spec("first"), 0.0)
    code = (
        "import sys; from heet_tui.control.store import Store\n"
        "from heet_tui.core.job import JobSpec, Target, TargetKind\n"
        "s = Store(sys.argv[1])\n"
        "for i in range(20):\n"
        "    s.add_job(JobSpec(f'j{i}', ('true',), 'm', 8, Target(TargetKind.STEPS, 1)), float(i))\n"
        "    s.add_event(float(i), 'submit', f'j{i}')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)])
    seen = 0
    while proc.poll() is None:
        seen = max(seen, len(store.jobs()))
        store.add_event(0.0, "tick", "controller round")
    assert proc.wait() == 0
    assert len(store.jobs()) == 21 and seen <= 21
    assert sum(e.kind == "submit" for e in store.events(limit=1000)) == 20


def test_a_store_of_the_first_schema_is_upgraded_in_place_keeping_its_jobs(tmp_path: Path) -> None:
    from heet_tui.control.store_schema import MIGRATIONS

    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    db = sqlite3.connect(path / "state.sqlite3")
    db.executescript(MIGRATIONS[0])
    db.execute("INSERT INTO jobs (id, name, spec, state, submitted_at, steps_done, crashes) "
               "VALUES ('old', 'old', ?, 'queued', 1.0, 40, 2)", (_spec_json("old"),))
    db.execute("INSERT INTO events (at, kind, job_id, message) VALUES (1.0, 'submit', 'old', 'submitted old from "
               "/lab/jobs/my old.toml')")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    db = sqlite3.connect(path / "state.sqlite3")  # months of a running job's reports, every 10 s
    db.executemany("INSERT INTO observations VALUES ('old', 'T4', '2', ?, ?, 'running')",
                   [(100.0 + i, float(i)) for i in range(500)])
    db.execute("INSERT INTO observations VALUES ('old', 'T4', '1', 60.0, 0.0, 'profiling')")
    db.commit()
    db.close()
    store = Store(path)
    assert store.schema_version == SCHEMA_VERSION > 1
    assert [r.job.id for r in store.jobs()] == ["old"]
    kept = store.observations("old")
    assert [o[3] for o in kept if o[2] == "2"] == [100.0 + i for i in range(468, 500)], "the latest 32 kept"
    assert [o[3] for o in kept if o[2] == "1"] == [60.0], "a cell with few rows loses none"
    store.add_restart_time("old", "start", 4.5, 2.0)
    assert store.restart_times() == [("old", "start", 4.5)]
    assert store.job("old").job.metrics == (), "no metrics reported yet"
    store.update_progress("old", 40, 1280.0, None, clear_crashes=True, current=True)
    assert store.job("old").crashes == 2, "the furthest step it had (40) came along: 40 is no new ground"
    assert not store.job("old").relaunch_requested, "no update asked for a relaunch"
    assert store.job("old").spec_file == "/lab/jobs/my old.toml", "taken from its submit event"
    kept = sqlite3.connect(path / "state.sqlite3.schema-1")  # what the older heet-tui can still read
    assert kept.execute("PRAGMA user_version").fetchone()[0] == 1
    assert kept.execute("SELECT id FROM jobs").fetchall() == [("old",)]
    assert (path / "state.sqlite3.schema-1").stat().st_mode & 0o077 == 0


def test_a_store_an_older_controller_runs_on_is_not_upgraded_under_it(tmp_path: Path) -> None:
    """A newer `heet-tui status` upgraded it in passing, and the running controller's own commands
    were refused from then on ("newer than this heet-tui")."""
    import fcntl
    import subprocess

    from heet_tui.control.store import StoreError
    from heet_tui.control.store_schema import MIGRATIONS

    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    db = sqlite3.connect(path / "state.sqlite3")
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    older = subprocess.Popen(["sleep", "600"])  # holds the controller lock, as a controller does
    lock = open(path / "controller.lock", "a+")
    lock.write(str(older.pid))
    lock.flush()
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(StoreError, match=rf"schema version 1, older than this heet-tui's .* the controller "
                                             rf"running on it \(pid {older.pid}\) is an older heet-tui"):
            Store(path)
        assert sqlite3.connect(path / "state.sqlite3").execute("PRAGMA user_version").fetchone()[0] == 1
    finally:
        lock.close()
        older.kill()
        older.wait()


def test_a_jobs_latest_metrics_are_kept_and_a_report_without_any_keeps_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    store.add_job(_spec("a"), 1.0)
    store.update_progress("a", 5, 160, None, metrics=(("loss", 2.5), ("acc", 0.1)))
    store.update_progress("a", 10, 320, None, metrics=(("loss", 1.5), ("acc", 0.4)))
    store.update_progress("a", 12, 384, None)  # a line that carried only bookkeeping
    assert store.job("a").job.metrics == (("loss", 1.5), ("acc", 0.4))
    assert Store(tmp_path / "state").jobs()[0].job.metrics == (("loss", 1.5), ("acc", 0.4)), "survives reopen"
    db = sqlite3.connect(tmp_path / "state" / "state.sqlite3")
    db.execute("UPDATE jobs SET metrics = '{not json'")
    db.commit()
    db.close()
    assert store.job("a").job.metrics == () and store.job("a").job.steps_done == 12, "the row still reads"


def test_a_metric_reported_now_and_then_is_kept_beside_those_of_every_line(tmp_path: Path) -> None:
    """A val_acc printed every N steps vanished at the next line that carried only the loss."""
    store = Store(tmp_path / "state")
    store.add_job(_spec("a"), 1.0)
    store.update_progress("a", 3, 96, None, metrics=(("loss", 2.5), ("val_acc", 0.5)))
    store.update_progress("a", 4, 128, None, metrics=(("loss", 2.0),))
    assert store.job("a").job.metrics == (("loss", 2.0), ("val_acc", 0.5)), "each metric's latest value"
    store.update_progress("a", 6, 192, None, metrics=(("val_acc", 0.75), ("lr", 0.1)))
    assert store.job("a").job.metrics == (("loss", 2.0), ("val_acc", 0.75), ("lr", 0.1)), "the newer line's wins"
    many = tuple((f"m{i}", float(i)) for i in range(8))
    store.update_progress("a", 8, 256, None, metrics=(("loss", 1.0), *many[:7]))
    kept = dict(store.job("a").job.metrics)
    assert len(kept) == 8 and kept["loss"] == 1.0 and all(kept[k] == v for k, v in many[:7]), \
        "still at most 8: all of the newest line's, then as many of the others as fit"


def _spec_json(name: str) -> str:
    from heet_tui.control.codec import spec_to_json

    return spec_to_json(_spec(name))


def test_a_cell_keeps_only_its_latest_observations(tmp_path: Path) -> None:
    from heet_tui.control.store_observations import OBSERVATIONS_PER_CELL

    store = Store(tmp_path / "state")
    for i in range(OBSERVATIONS_PER_CELL + 10):
        store.add_observation("a", "T4", "2", 100.0 + i, float(i), "running")
    store.add_observation("a", "T4", "1", 50.0, 0.0, "profiling")
    store.add_observation("b", "T4", "2", 70.0, 0.0, "running")
    rows = store.observations()
    assert [r[3] for r in rows if r[:3] == ("a", "T4", "2")] == [100.0 + i for i in range(10, OBSERVATIONS_PER_CELL + 10)]
    assert [r[3] for r in rows if r[:3] != ("a", "T4", "2")] == [50.0, 70.0]


def test_drained_hosts_keep_why_until_undrained(tmp_path: Path) -> None:
    from heet_tui.control.drains import drain_reasons, drained_hosts, set_drained

    store = Store(tmp_path / "state")
    set_drained(store, "b", True, "found broken")
    set_drained(store, "a", True)
    set_drained(store, "b", True)  # drained again by hand: the known reason stays
    assert drained_hosts(store) == {"a", "b"} and drain_reasons(store) == {"b": "found broken"}
    set_drained(store, "b", False)
    assert drained_hosts(store) == {"a"} and drain_reasons(store) == {}
    store.set_setting("drain_reasons", "[not a dict")
    assert drain_reasons(store) == {}, "unreadable: no reasons, the drained set still holds"


def test_a_launch_behind_the_furthest_step_shows_where_it_is_and_crashes_still_count(tmp_path: Path) -> None:
    """A launch that resumed from an older checkpoint showed the furthest step ever reached, and
    its remaining work was counted from there. Crashes must still count until it passes that step,
    or a job that crashes at one step after every resume from scratch is retried for ever."""
    store = Store(tmp_path / "state")
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 100)), 0.0)
    store.update_progress("j", 60, 1920.0, None, current=True)
    store.count_crash("j")
    store.update_progress("j", 10, 320.0, None, clear_crashes=True, current=True)  # from scratch
    rec = store.job("j")
    assert (rec.job.steps_done, rec.job.samples_done, rec.crashes) == (10, 320.0, 1)
    store.update_progress("j", 5, 160.0, None)  # not the launch's own: an agent's late report
    assert store.job("j").job.steps_done == 10
    store.update_progress("j", 61, 1952.0, None, clear_crashes=True, current=True)
    assert (store.job("j").job.steps_done, store.job("j").crashes) == (61, 0), "new ground"


def test_only_the_newest_events_are_kept(tmp_path: Path, monkeypatch) -> None:
    """A busy lab adds an event a second, and the table only grew."""
    from heet_tui.control import store_events

    monkeypatch.setattr(store_events, "KEEP_EVENTS", 50)
    monkeypatch.setattr(store_events, "PRUNE_EVERY", 10)
    store = Store(tmp_path / "state")
    for i in range(1, 201):
        store.add_event(float(i), "filler", f"event {i}")
    kept = store.events(limit=1000)
    assert 50 <= len(kept) < 60 and kept[-1].message == "event 200", len(kept)
    assert [e.message for e in kept[-50:]] == [f"event {i}" for i in range(151, 201)], "the newest, in order"


def test_a_state_directory_someone_else_owns_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, a state directory of uid nobody's was chmodded private and used: its owner could
    swap the database under the controller."""
    import os

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if os.getuid() == 0:  # as root, really another user's
        os.chown(theirs, 65534, -1)
    else:  # a user cannot give a directory away: the controller runs as someone else instead
        someone_else = os.getuid() + 1
        monkeypatch.setattr(os, "getuid", lambda: someone_else)
    owner = theirs.stat().st_uid
    with pytest.raises(StoreError, match=rf"theirs: it is owned by uid {owner}, not by you; pass --state"):
        Store(theirs)
    assert not (theirs / "state.sqlite3").exists()


def test_a_shared_directory_with_other_files_is_not_made_a_private_state_directory(tmp_path) -> None:
    """`--state teamdir` turned a 2775 team directory 0700 beside its files, without a word."""
    import os
    import stat

    team = tmp_path / "teamdir"
    team.mkdir()
    os.chmod(team, 0o2775)
    (team / "shared.txt").write_text("data\n")
    with pytest.raises(StoreError, match=r"teamdir: it holds other files \(shared.txt\) and no state store"):
        Store(team)
    assert stat.S_IMODE(team.stat().st_mode) == 0o2775 and sorted(p.name for p in team.iterdir()) == ["shared.txt"]
    fresh = tmp_path / "fresh"
    fresh.mkdir(mode=0o755)
    Store(fresh)  # empty: taken, and made private
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700


def test_the_controller_log_names_each_events_job(tmp_path, caplog) -> None:
    """"failed: rank 0 on la1 ended with exit code 2": grep of the job in controller.log missed it."""
    import logging

    store = Store(tmp_path / "state")
    with caplog.at_level(logging.INFO, logger="heet_tui.events"):
        store.add_event(1.0, "failed", "rank 0 on la1 ended with exit code 2", "f1", "la1")
        store.add_event(2.0, "launch", "f1 generation 2: 1xT4 on lt1", "f1")
        store.add_event(3.0, "host", "la1 is back", None, "la1")
    assert [r.getMessage() for r in caplog.records] == [
        "failed: f1: rank 0 on la1 ended with exit code 2", "launch: f1 generation 2: 1xT4 on lt1", "host: la1 is back"]
