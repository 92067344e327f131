"""Which backend the app runs against: the simulator demo or the real controller on a hosts file.

When the chosen backend cannot be built (no controller yet, a broken hosts file), the app still
opens on the Hosts screen with the reason, instead of dying with a traceback before any UI.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from heet_tui.config.errors import ConfigError
from heet_tui.config.hosts_file import load_hosts, resolve_hosts_path
from heet_tui.control.hosts_choice import LAST_USED, gone_error
from heet_tui.core.backend import Backend


@dataclass(frozen=True, slots=True)
class BackendChoice:
    backend: Backend | None
    hosts_path: Path | None
    notice: str = ""
    start_mode: str = "jobs"
    # Attached to another process's controller: how to attach again once it runs again.
    reattach: Callable[[], Awaitable[Backend | None]] | None = None
    # No controller for want of a readable hosts file: how to choose again once it is fixed
    retry: Callable[[], BackendChoice] | None = None


def choose_backend(args: argparse.Namespace) -> BackendChoice:
    hosts_path = resolve_hosts_path(getattr(args, "hosts", None))
    if getattr(args, "demo", False):
        try:
            from heet_tui.control.demo_backend import DemoBackend

            given = {k: Path(v) for k in ("cluster", "workload") if (v := getattr(args, f"demo_{k}", None))}
            return BackendChoice(DemoBackend.reference(**given), hosts_path, start_mode="jobs")
        except (ImportError, ConfigError, ValueError) as exc:  # a file of the user's: its line (SimInputError)
            return BackendChoice(None, hosts_path, f"demo not available: {exc}", start_mode="hosts")
    return _controller(args, hosts_path)


def _controller(args: argparse.Namespace, hosts_path: Path) -> BackendChoice:
    """The real controller on the hosts file; any reason it cannot start is shown, not raised."""
    try:
        from heet_tui.control.controller import Controller, ControllerOptions
        from heet_tui.control.snapshots import controller_running
        from heet_tui.control.store import Store
    except ImportError as exc:
        return BackendChoice(None, hosts_path, f"controller not available in this build ({exc}): showing the "
                             "hosts file only (try heet-tui --demo)", start_mode="hosts")
    from heet_tui.control.threaded import ThreadedBackend

    state = getattr(args, "state", None)
    try:
        probe = Store(state)  # opened here only to say early, and clearly, why it cannot start
        other = controller_running(probe.dir)
        served = probe.setting("hosts_path")
        probe.close()
        if other is not None:  # e.g. `heet-tui run` in tmux: this TUI attaches to it
            from heet_tui.control.attach_client import AttachedBackend

            state_dir = probe.dir
            # the Hosts screen edits the file that controller follows, whatever this one would pick
            shown = Path(served) if served else hosts_path
            return BackendChoice(ThreadedBackend(lambda: AttachedBackend(state_dir), name="heet-attached"),
                                 shown, f"attached to the controller (pid {other}) running on {state_dir} with "
                                 f"{shown}; quitting this TUI leaves it running", start_mode="cluster",
                                 reattach=partial(reattach, state_dir))
        # Only a controller of our own needs the hosts file; attaching (above) does not. It is
        # the one this state last ran on unless one is given: a lab's jobs moved to the default file
        hosts_path = resolve_hosts_path(getattr(args, "hosts", None), served)
        said = (f"hosts from {hosts_path} ({LAST_USED})"
                if hosts_path != resolve_hosts_path(getattr(args, "hosts", None)) else "")
        try:
            if said:
                gone_error(hosts_path, probe.dir)
            hosts = load_hosts(hosts_path)
        except ConfigError as exc:
            return BackendChoice(None, hosts_path, f"fix the hosts file to start the controller: {exc}",
                                 start_mode="hosts", retry=partial(choose_backend, args))
        # The controller lives on its own thread and loop: SSH, SQLite and the solver never
        # share the UI's event loop.
        # Read-only and nothing running: watch only, even if the store says auto-approve.
        options = ControllerOptions(read_only=bool(getattr(args, "read_only", False)))
        backend = ThreadedBackend(lambda: Controller(hosts, Store(state), options))
        return BackendChoice(backend, hosts_path, said, start_mode="cluster")
    except (OSError, RuntimeError, ValueError) as exc:
        return BackendChoice(None, hosts_path, f"controller cannot start: {exc}", start_mode="hosts")


async def reattach(state_dir: Path) -> Backend | None:
    """A started backend attached to the controller on ``state_dir`` if one answers there now, else None.

    Asked every few seconds once the controller is gone, so it only knocks on the socket: the
    state lock is never touched (a probe holding it at the wrong moment would stop a starting
    ``heet-tui run``), and a dead controller's socket file refuses the connection.
    """
    from heet_tui.control.attach import socket_path
    from heet_tui.control.attach_client import AttachedBackend
    from heet_tui.control.threaded import ThreadedBackend

    if not await asyncio.to_thread(_answers, socket_path(state_dir)):
        return None
    backend = ThreadedBackend(lambda: AttachedBackend(state_dir), name="heet-attached")
    try:
        await backend.start()
    except (OSError, RuntimeError, ValueError):  # ControllerGone is an OSError: it went again, or is not ready
        await backend.stop()  # its thread and loop go with it
        return None
    return backend


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
