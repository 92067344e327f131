"""The agent's state file: which jobs it started, so a restarted agent can re-adopt them.

Written atomically (write + rename) after every change; a torn or foreign file is moved aside
rather than trusted, because a wrong pid could make the agent signal an unrelated process.
"""

import json
import os
import time

from heet_agent.atomic_file import open_private

STATE_NAME = "agent-state.json"
KEEP_FINISHED = 100


def proc_start_time(pid):
    """The kernel's start time of ``pid`` (jiffies since boot), to tell a reused pid apart."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            data = fh.read()
        return data[data.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def left_in_group(pgid, started):
    """Processes still in group ``pgid`` that started no earlier than its leader (``started``,
    in jiffies): what a job forked and left behind. Read from /proc; none where there is none."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as fh:
                fields = fh.read()
            rest = fields[fields.rindex(")") + 2:].split()
            group, start = int(rest[2]), int(rest[19])
        except (OSError, ValueError, IndexError):
            continue
        if group == pgid and (started is None or start >= int(started)):
            found.append(int(name))
    return found


def _group_id(value):
    """A pid or process group a record may signal: killpg(0) or (1) would reach the agent's own
    group or every process of the user."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 1


def pid_alive(pid, start_time):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start_time is not None:
        now = proc_start_time(pid)
        if now is not None and now != start_time:
            return False
        try:  # a zombie still answers kill(0); it is dead for our purposes
            with open("/proc/%d/stat" % pid) as fh:
                data = fh.read()
            if data[data.rindex(")") + 2:].split()[0] == "Z":
                return False
        except (OSError, ValueError, IndexError):
            pass
    return True


class StateFile:
    def __init__(self, workdir):
        self.path = os.path.join(workdir, STATE_NAME)

    def load(self):
        """``(jobs, floors, note)``; ``note`` explains a file that could not be used."""
        try:
            with open(self.path) as fh:
                data = json.load(fh)
            jobs = data.get("jobs", [])
            floors = data.get("floors", {})
            if not isinstance(jobs, list) or not isinstance(floors, dict):
                raise ValueError("unexpected shape")
            jobs = [j for j in jobs if isinstance(j, dict) and _group_id(j.get("pid")) and _group_id(j.get("pgid"))]
            return jobs, {str(k): int(v) for k, v in floors.items()}, None
        except FileNotFoundError:
            return [], {}, None
        except (OSError, ValueError, TypeError) as exc:
            aside = self.path + ".bad-%d" % int(time.time())
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            return [], {}, f"state file unreadable ({exc}); moved to {aside}"

    def save(self, jobs, floors):
        """Raises OSError (a full disk, a quota) with the old file left whole."""
        data = {"jobs": jobs, "floors": floors}  # ended ones already cut to KEEP_FINISHED (jobs.py)
        tmp = self.path + ".tmp"
        try:
            with open_private(tmp, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
