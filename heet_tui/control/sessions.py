"""Which controller run came before this one on the store, for the agents' takeover.

Each run names a session, and an agent refuses another session of its store while its own
controller still speaks, and for good once it has refused one (``remote/takeover.py``): that
keeps the controller of a copy of the state off the hosts. A restart after a network cut met
the same refusal, for as long as the old agent's half-open link lived. The run that took the
store before is recorded here; a new run on the same machine, once that process is gone, is
its successor, and the agents it names take over at once. A copy started while the original
runs finds the original's process alive and claims nothing.
"""

from __future__ import annotations

import json
import os
import socket

from heet_agent.jobstate import pid_alive

from heet_tui.control.store import Store

SETTING = "controller_session"


def succeed(store: Store, session: str) -> str:
    """Record this run's ``session``; return the one it succeeds ("" when it may not claim any)."""
    try:
        prev = json.loads(store.setting(SETTING) or "{}")
        mine = isinstance(prev, dict) and prev.get("host") == socket.gethostname() and not _alive(int(prev["pid"]))
        previous = str(prev.get("session") or "") if mine else ""
    except (ValueError, TypeError, KeyError):
        previous = ""
    store.set_setting(SETTING, json.dumps({"session": session, "pid": os.getpid(), "host": socket.gethostname()}))
    return previous


def _alive(pid: int) -> bool:
    return pid > 0 and pid_alive(pid, None)
