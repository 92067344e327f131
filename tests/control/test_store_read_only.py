"""A state store that cannot be written: read as last written, and its write-ahead log kept small
(split from test_store.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from heet_tui.control.snapshots import controller_running
from heet_tui.control.store import Store, StoreWriteError


def test_a_state_directory_that_cannot_be_written_is_read_as_last_written(tmp_path: Path) -> None:
    """An immutable (or read-only) state directory: `heet-tui jobs` said only "state store st1:
    [Errno 1] Operation not permitted: 'st1'" (its chmod to 0700 failed, though it was 0700), then
    that it could not be read without writing it. A backup copy is now read as it is."""
    import os
    import shutil

    state = tmp_path / "state"
    store = Store(state)
    store.add_event(1.0, "note", "written before")
    store.close()
    (state / "controller.lock").write_text("")  # a controller ran here once
    files = [str(p) for p in state.iterdir()]
    if os.getuid() != 0:  # a user's own permissions bind them: read-only modes
        def lock(paths: list[str]) -> None:
            for path in paths:
                os.chmod(path, 0o500 if Path(path).is_dir() else 0o400)

        def unlock() -> None:
            for path in [str(state), *files]:
                os.chmod(path, 0o700 if Path(path).is_dir() else 0o600)
    else:  # root ignores modes: immutable, as the user who found it had made it
        chattr = shutil.which("chattr") or "chattr"

        def lock(paths: list[str]) -> None:
            subprocess.run([chattr, "+i", *paths], check=True)

        def unlock() -> None:
            subprocess.run([chattr, "-i", str(state), *files], check=True)
    try:
        for contents in ([str(state)], files):  # the directory alone, then its files too
            lock(contents)
            copy = Store(state)
            assert [e.message for e in copy.events(limit=5)] == ["written before"]
            assert controller_running(state) is None, "asked without writing (a traceback on a read-only disk)"
            assert "shown as last written" in copy.read_only_why
            with pytest.raises(StoreWriteError, match=r"cannot write \(unable to open database file; .*shown as last "
                                                      r"written"):
                copy.add_event(2.0, "note", "refused")
            copy.close()
    finally:
        unlock()



def test_the_write_ahead_log_stays_small_while_the_store_is_open(tmp_path: Path) -> None:
    """It grew to 4 MB beside a 100 KB store and stayed there: on a small disk that was the full disk."""
    store = Store(tmp_path / "state")
    reader = Store(tmp_path / "state")  # another process's connection, as `heet-tui jobs` beside the controller
    for i in range(3000):
        store.add_event(float(i), "note", "x" * 500)
        if i % 500 == 0:
            reader.events(limit=1)
    wal = tmp_path / "state" / "state.sqlite3-wal"
    assert wal.stat().st_size <= 1.5 * (1 << 20), wal.stat().st_size



def test_a_state_directory_on_a_read_only_disk_is_read_whatever_its_mode(tmp_path: Path, monkeypatch) -> None:
    """A tmpfs remounted read-only, its root 1777: the chmod to 0700 failed with "Read-only file
    system" and every command refused the store (the failure injected: os.chmod says EROFS)."""
    import errno
    import os

    state = tmp_path / "state"
    store = Store(state)
    store.add_event(1.0, "note", "written before")
    store.close()
    os.chmod(state, 0o1777)

    def read_only(path, mode, *args, **kwargs):  # noqa: ANN001, ANN202
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(os, "chmod", read_only)
    copy = Store(state)
    assert [e.message for e in copy.events(limit=5)] == ["written before"]
    copy.close()
