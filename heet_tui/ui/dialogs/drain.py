"""The question before a drain that stops running jobs, asked alike by d on the Cluster screen and
the palette's "drain host…" (the palette drained at once: under auto-approve its jobs stopped
unasked, where d asked first)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from heet_tui.core.intents import DrainHost, Intent
from heet_tui.core.snapshot import Snapshot
from heet_tui.ui.dialogs.confirm import ConfirmDialog

Post = Callable[[Intent, str], None]  # sends an intent with how to describe it (the screen's request)


def jobs_on(snap: Snapshot | None, host: str) -> list[str]:
    """The jobs running on ``host`` by the latest snapshot: those a drain stops."""
    if snap is None:
        return []
    return [j.id for j in snap.jobs if j.allocation is not None and host in j.allocation.host_names]


def drain_question(host: str, running: list[str], auto_approve: bool) -> str:
    """What draining ``host`` does to the jobs ``running`` there, and when: at once under
    auto-approve, else at the next plan the user approves."""
    when = "at once: auto-approve is on" if auto_approve else "at the next plan you approve"
    jobs = ", ".join(running[:5]) + (f" and {len(running) - 5} more" if len(running) > 5 else "")
    # "move off" was said where no other host had room: they only stopped
    return (f"Drain {host}? No job starts there, and the {len(running)} running on it ({jobs}) "
            f"{'stop' if len(running) > 1 else 'stops'} {when}, to start again where a plan finds room.")


def drain_asking_first(app: App, host: str, snap: Snapshot | None, post: Post) -> None:
    """Drains ``host`` at once where no job runs on it; where jobs do, asks first and drains only
    on yes (one key press moved 8 jobs, unasked)."""
    running = jobs_on(snap, host)
    if not running:
        post(DrainHost(host, True), f"drain {host}")
        return

    def answered(yes: bool | None) -> None:
        if yes:
            post(DrainHost(host, True), f"drain {host}")

    auto_approve = snap.auto_approve if snap is not None else False
    app.push_screen(ConfirmDialog(drain_question(host, running, auto_approve), yes="Drain"), answered)
