"""One agent per host entry: a new agent takes over from an older one of the same controller.

A controller that reconnects (a lost link, a restart) starts a new agent, which asks the old
one to exit and takes the workdir's lock. An agent started by another controller (another
state directory on the same hosts) must not do that: the two would take the host from each
other at every reconnect, each seeing the other's jobs as lost. So the lock holder records the
controller it serves, and a newcomer for another controller is refused while it lives.

A copy of a state directory (a backup restored beside the original, ``cp -r``) names the same
store, so the store alone cannot tell its controller from the original's. Each controller run
also names a session, and the agent marks ``agent.session`` whenever its controller speaks
(at least every ten seconds, by its pings): a newcomer of another session is refused while that
mark is fresh, and for good once refused. A restarted controller is not held up by it: its old
agent saw the link close and exited, or, cut off, serves the run the newcomer names as the one it
succeeds (``control/sessions.py``).
"""

import fcntl
import os
import signal
import time

from heet_agent.atomic_file import atomic_write_text, open_private
from heet_agent.errors import JobError

LOCK_WAIT_S = 5.0
KILL_OLD_AFTER_S = 1.5
SPOKEN_WITHIN_S = 25.0  # a live controller pings its agent every 10 s
MARK_EVERY_S = 2.0
REFUSED_KEPT = 20  # controller runs refused as copies, remembered (agent.refused)
SESSION, REFUSED = "agent.session", "agent.refused"


def is_agent(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return False
    return b"heet-agent" in cmdline or b"heet_agent" in cmdline


def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _live_agent(workdir):
    """(pid, the store it serves) of another live agent holding this workdir, else (0, None)."""
    try:
        pid = int(_read(os.path.join(workdir, "agent.pid")) or 0)
    except ValueError:
        pid = 0
    if not (pid and pid != os.getpid() and is_agent(pid)):
        return 0, None
    return pid, _read(os.path.join(workdir, "agent.owner"))


def served_by_another(workdir, owner):
    """For a check (which takes no lock): what a controller of ``owner`` would be told here, as a
    warning; None when no live agent serves another store. "ready" said nothing of it, and the
    controller was then refused."""
    pid, serving = _live_agent(workdir)
    if not serving or serving == owner:
        return None
    whose = "another state store's" if owner else "a"
    return (f"{whose} heet-tui controller manages this host (its agent pid {pid} serves state store "
            f"{serving[:12]}): a controller of {'this' if owner else 'another'} state store is refused here "
            "while it runs; another user needs a workdir of their own")


def take_over(workdir, owner, session="", previous=""):
    """Become the only agent for this workdir and hold its lock; ``owner`` names the controller.

    An older agent of the same controller (or of an unknown one: agents from before owners were
    recorded) is asked to exit; a hung one is killed after a short grace, which is safe because
    jobs never depend on the agent that started them. One that serves another controller is
    left alone and this agent is refused.
    """
    pid_path, owner_path = os.path.join(workdir, "agent.pid"), os.path.join(workdir, "agent.owner")
    old, serving = _live_agent(workdir)
    if old and serving and serving != owner:
        raise JobError(f"this host is managed by another heet-tui controller (its agent pid {old} serves state "
                       f"store {serving[:12]}, this controller's is {owner[:12] or 'unnamed'}): stop that "
                       f"controller, or run this one with the other's --state; another user on this host needs a "
                       f"workdir of their own in their hosts file")
    if old and session:
        _refuse_another_session(workdir, old, session, previous)
    if old:
        try:
            os.kill(old, signal.SIGTERM)
        except OSError:
            old = 0
    lock = open_private(os.path.join(workdir, "agent.lock"), "w")
    started = time.time()
    killed = False
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            waited = time.time() - started
            if old and not killed and waited > KILL_OLD_AFTER_S and is_agent(old):
                try:
                    os.kill(old, signal.SIGKILL)
                except OSError:
                    pass
                killed = True
            if waited > LOCK_WAIT_S:
                lock.close()
                raise JobError("another agent holds %s/agent.lock" % workdir) from None
            time.sleep(0.05)
    for path, text in ((pid_path, str(os.getpid())), (owner_path, owner), (os.path.join(workdir, SESSION), session)):
        _write_small(path, text)
    return lock


def _refuse_another_session(workdir, old, session, previous):
    """Raise unless ``session`` may take over from the one the live agent ``old`` serves: the
    same run reconnecting, the run its store says succeeds it, or another one whose run has not
    spoken for ``SPOKEN_WITHIN_S`` and that was never refused here. Refused once, refused for as
    long as that agent lives: a pause of the other (kill -STOP, a laptop's suspend) handed a copy
    the host after 25 s, and it stopped the other's jobs."""
    session_path, refused_path = os.path.join(workdir, SESSION), os.path.join(workdir, REFUSED)
    if previous and _read(session_path) == previous:
        return
    spoken = _spoken_ago(session_path, session)
    if spoken is None or (spoken >= SPOKEN_WITHIN_S and session not in _lines(refused_path)):
        return
    _write_small(refused_path, "\n".join((_lines(refused_path) + [session])[-REFUSED_KEPT:]))
    raise JobError(f"this host is managed by another heet-tui controller of the same state store (a copy "
                   f"of its --state directory?): its agent pid {old} serves it (heard from it {spoken:.0f} s "
                   "ago); stop one of the two and restart the other (two controllers of one store would "
                   "take the host from each other)")


def _lines(path):
    return [line for line in (_read(path) or "").splitlines() if line]


def _spoken_ago(path, session):
    """Seconds since the agent serving another session of this store last heard from it; None
    when it serves this session (a reconnect), or says nothing (an agent from before sessions)."""
    try:
        with open(path) as fh:
            serving = fh.read().strip()
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    if not serving or serving == session:
        return None
    return max(0.0, time.time() - mtime)


class SessionMark:
    """``agent.session``'s time moved on when the controller speaks, at most every few seconds."""

    def __init__(self, workdir):
        self.path = os.path.join(workdir, SESSION)
        self.marked = 0.0

    def spoken(self):
        now = time.time()
        if now - self.marked >= MARK_EVERY_S:
            self.marked = now
            try:
                os.utime(self.path)
            except OSError:  # gone, or a full disk: a newcomer then takes over, as before sessions
                pass


def _write_small(path, text):
    """Write ``text`` to ``path`` unless it holds it already, atomically. On a full disk the old
    file stays as it was and the agent goes on (a stale pid is checked before it is signalled):
    refusing hello there lost the host, and its jobs, until someone freed space."""
    if _read(path) == text:
        return
    try:
        atomic_write_text(path, text)
    except OSError:
        pass
