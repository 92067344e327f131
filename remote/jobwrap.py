"""The tiny parent each job runs under, so its exit code survives the agent.

The agent may exit (stdin EOF, a lost SSH link) while jobs keep running; a later agent is not
their parent and cannot ``wait()`` for them. This wrapper is: it leads the job's own session
and process group, ignores the group-wide SIGTERM the agent sends (the job itself still gets
it, since handlers reset on exec), and writes the job's exit status to a file atomically.

A run given ``HEET_RUN_MAX_S`` (profiling runs) is stopped by this wrapper once past it, as the
agent stops a job (SIGTERM to the group, SIGKILL after ``HEET_STOP_GRACE``): the controller
stops such runs after a few reports, and while it was down one trained its job's whole target
for nobody.
"""

import json
import os
import signal
import subprocess
import sys
import time

from heet_agent.atomic_file import open_private


def _write_exit(path, status):
    """Record the exit; on a full disk say so and go on: this wrapper's own exit code still
    carries the status to an agent that is its parent (jobs.py)."""
    tmp = path + ".tmp"
    status["ended_at"] = time.time()  # a later agent, or none for hours, reads it: its own clock is late
    try:
        with open_private(tmp, "w") as fh:
            json.dump(status, fh)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            sys.stderr.write("heet-agent: cannot record the exit status %r: %s\n" % (status, exc))
        except OSError:
            pass


def run(exit_file, argv):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write("heet-agent: cannot start {!r}: {}\n".format(argv[0] if argv else "", exc))
        _write_exit(exit_file, {"exit_code": 127, "signal": None, "error": str(exc)})
        return 127
    code = _wait(child, _seconds("HEET_RUN_MAX_S"))
    if code < 0:
        _write_exit(exit_file, {"exit_code": None, "signal": -code})
        return 128 - code
    _write_exit(exit_file, {"exit_code": code, "signal": None})
    return code


def _seconds(name):
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _wait(child, max_s):
    if max_s is None:
        return child.wait()
    try:
        return child.wait(timeout=max_s)
    except subprocess.TimeoutExpired:
        pass
    sys.stderr.write("heet-agent: stopped: this run was still going after %g s, its bound (HEET_RUN_MAX_S): "
                     "the controller that stops it after a few reports did not\n" % max_s)
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGTERM)  # the job and its workers; this wrapper ignores it
    try:
        code = child.wait(timeout=_seconds("HEET_STOP_GRACE") or 30.0)
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    _kill_group_but_me()  # the job's own children too (SIGKILL of the child alone left a grandchild running)
    return code


def _kill_group_but_me():
    """SIGKILL every other process of this wrapper's group (the job's children and workers)."""
    me, group = os.getpid(), os.getpgrp()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == me:
            continue
        try:
            if os.getpgid(pid) == group:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass  # gone meanwhile, or not ours to see
