"""controller.log after an outside logrotate: the controller wrote on into the moved file."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from heet_tui.control.log_file import LOG_NAME, attach_log_file, detach_log_file


def test_a_log_moved_away_by_logrotate_is_written_anew_and_kept_private(tmp_path: Path) -> None:
    log = logging.getLogger("heet_tui.test_log_file")
    handler = attach_log_file(tmp_path)
    try:
        log.warning("before the rotation")
        (tmp_path / LOG_NAME).rename(tmp_path / f"{LOG_NAME}.1")  # logrotate's default: move, no copytruncate
        log.warning("after the rotation")
        (tmp_path / LOG_NAME).unlink()  # deleted outright: the next record makes it again
        log.warning("after the delete")
    finally:
        detach_log_file(handler)
    moved = (tmp_path / f"{LOG_NAME}.1").read_text()
    assert "before the rotation" in moved and "after the rotation" not in moved
    new = tmp_path / LOG_NAME
    assert "after the delete" in new.read_text() and "after the rotation" not in new.read_text()
    assert stat.S_IMODE(new.stat().st_mode) == 0o600, "the reopened log is private, as the first one"


def test_a_log_left_in_place_stays_one_file(tmp_path: Path) -> None:
    log = logging.getLogger("heet_tui.test_log_file")
    handler = attach_log_file(tmp_path)
    try:
        for i in range(3):
            log.warning("line %d", i)
    finally:
        detach_log_file(handler)
    assert [p.name for p in tmp_path.iterdir()] == [LOG_NAME]
    assert [line.rsplit(" ", 1)[-1] for line in (tmp_path / LOG_NAME).read_text().splitlines()] == ["0", "1", "2"]


def test_the_files_its_own_rotation_starts_are_private(tmp_path: Path) -> None:
    import os

    log = logging.getLogger("heet_tui.test_log_file")
    handler = attach_log_file(tmp_path)
    handler.maxBytes = 200  # type: ignore[attr-defined]  (5 MB in use)
    old = os.umask(0o022)
    try:
        for i in range(20):
            log.warning("line %d of a log that rotates", i)
    finally:
        os.umask(old)
        detach_log_file(handler)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [LOG_NAME, f"{LOG_NAME}.1", f"{LOG_NAME}.2", f"{LOG_NAME}.3"], files
    assert all(stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600 for name in files)



def test_a_log_on_a_full_disk_loses_records_quietly_and_says_how_many_after(tmp_path: Path) -> None:
    """Each record printed a 50-line "--- Logging error ---" traceback into `heet-tui run`'s output.
    The disk here is a file-size limit (RLIMIT_FSIZE) the kernel enforces on this one process."""
    import subprocess
    import sys

    script = f"""
import logging, resource, signal
from pathlib import Path
from heet_tui.control.log_file import LOG_NAME, attach_log_file, detach_log_file
state = Path({str(tmp_path)!r})
handler = attach_log_file(state)
log = logging.getLogger("heet_tui.test_log_file")
log.warning("before")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ((state / LOG_NAME).stat().st_size, resource.RLIM_INFINITY))
for i in range(3):
    log.warning("lost %d", i)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
log.warning("after")
detach_log_file(handler)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Logging error" not in done.stderr, done.stderr
    lines = (tmp_path / LOG_NAME).read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "before", "after", f"3 log record(s) before this one were lost: {LOG_NAME} could not be written (File too "
        "large) (the events are in the state store too, unless it shares the full disk: heet-tui jobs NAME)"], lines
