"""The state store against others: folders others may write, the umask, text that would drive a terminal."""

from __future__ import annotations

import pytest

from heet_tui.control.store import Store, StoreError
from heet_tui.core.job import JobSpec, JobState, Target, TargetKind


def test_an_event_holds_no_terminal_sequences(tmp_path, caplog) -> None:
    """A submitted file's name and a spec's script path carried escapes into events: the TUI's job
    pane and `tail -f controller.log` retitled the terminal; a right-to-left mark reversed lines."""
    import logging

    store = Store(tmp_path / "state")
    with caplog.at_level(logging.INFO, logger="heet_tui.events"):
        store.add_event(1.0, "submit", "submitted j from /w/a\x1b]0;TITLE\x07\u202e.toml\nsecond line", "j")
    shown = "submitted j from /w/a\\x1b]0;TITLE\\x07\\u202e.toml\nsecond line"
    assert store.events("j")[-1].message == shown
    assert caplog.records[-1].getMessage() == f"submit: {shown}"
    store.add_job(JobSpec("j", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.set_state("j", JobState.QUEUED, 2.0, "waiting: /w/\x1b]0;T\x07\u202e")
    assert store.job("j").job.message == "waiting: /w/\\x1b]0;T\\x07\\u202e", "a job's message too"


def test_a_state_directory_below_a_directory_anyone_may_write_is_refused(tmp_path) -> None:
    """As a hosts file's or a workdir's: a non-sticky 0777 directory above let anyone swap the store."""
    import os

    opened = tmp_path / "open"
    opened.mkdir()
    os.chmod(opened, 0o777)
    with pytest.raises(StoreError, match=r"open above it may be written by every user \(and is not sticky\)"):
        Store(opened / "st")
    assert not (opened / "st" / "state.sqlite3").exists()
    os.chmod(opened, 0o1777)  # sticky, as /tmp: fine
    Store(opened / "st2")


def test_the_directories_made_for_a_state_store_are_private_whatever_the_umask(tmp_path) -> None:
    """Under a umask of 000 the first command made ~/.local and ~/.local/state 0777 for the default
    state directory, then refused it for the parent it had just made."""
    import os
    import stat

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    state = home / ".local" / "state" / "heet-tui"
    old = os.umask(0)
    try:
        Store(state).close()
    finally:
        os.umask(old)
    for made in (home / ".local", home / ".local" / "state", state):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700, made


def test_text_an_older_version_stored_raw_is_shown_escaped(tmp_path) -> None:
    """Events and job messages are escaped when written since 2026-12-06; an older heet-tui wrote
    them raw, and after the upgrade the TUI showed such an event (a submitted file's name with an
    OSC 0 in it) and retitled the terminal."""
    import sqlite3

    store = Store(tmp_path / "state")
    store.add_job(JobSpec("old", ("python3", "t.py"), "m", 32, Target(TargetKind.STEPS, 10)), 0.0)
    store.add_event(1.0, "submit", "placeholder", "old")
    with sqlite3.connect(tmp_path / "state" / "state.sqlite3") as db:  # as the older version left them
        db.execute("UPDATE events SET message = ?, host = ? WHERE job_id = 'old'",
                   ("submitted old from /w/e\x1b]0;PWNED\x07", "h\x1b]0;HOST\x07"))
        db.execute("UPDATE jobs SET message = ? WHERE id = 'old'", ("waiting: /w/\u202e",))
    again = Store(tmp_path / "state")
    assert again.events("old")[-1].message == "submitted old from /w/e\\x1b]0;PWNED\\x07"
    assert again.events("old")[-1].host == "h\\x1b]0;HOST\\x07", "its host too"
    assert again.job("old").job.message == "waiting: /w/\\u202e"
    assert again.jobs()[0].job.message == "waiting: /w/\\u202e", "the listing too"
