"""The jobs an agent runs: launch, stop (SIGTERM the group, grace, SIGKILL), fence, log tails,
progress forwarding, and re-adoption of jobs a previous agent started.

Each job runs under ``jobwrap`` in its own session, with stdout and stderr in a log file; the
agent reads progress lines from that file, so an agent that restarts simply continues reading.
"""

import json
import os
import re
import signal
import sys
import time

from heet_agent.atomic_file import open_private
from heet_agent.checkpoint_dirs import (
    claim_checkpoint_dir,
    make_scratch_dir,
    makedirs_private,
    remove_scratch_dir,
    resolve_checkpoint_dir,
)
from heet_agent.errors import STILL_STOPPING, JobError
from heet_agent.job_env import job_environment
from heet_agent.job_logs import MIN_ROTATE_BYTES, ROTATE_BYTES, read_tail, remove_log
from heet_agent.jobstate import KEEP_FINISHED, StateFile, left_in_group, pid_alive, proc_start_time
from heet_agent.log_follow import follow_log
from heet_agent.progress import parse_progress_line

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}\Z")
MAX_TAIL_LINES = 10_000  # a reply is held to 256K characters (job_logs.py): `log -f` catching up asks for this many


def _key(job):
    return "%s@%d" % (job["job_id"], job["generation"])


def _check_int(args, name, low=0):
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise JobError("%s must be an integer >= %d, got %r" % (name, low, value))
    return value


def _check_int_list(args, name, default):
    value = args.get(name) or default
    if not isinstance(value, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in value):
        raise JobError("%s must be a list of integers" % name)
    return value


def _check_job_id(args):
    job_id = args.get("job_id")
    if not isinstance(job_id, str) or not JOB_ID.match(job_id):
        raise JobError(f"job_id must be letters, digits, '.', '_' or '-', got {job_id!r}")
    return job_id


class JobTable:
    def __init__(self, workdir, self_argv, send_event):
        self.workdir = workdir
        self.self_argv = self_argv
        self.send_event = send_event
        self.state = StateFile(workdir)
        self.jobs = []  # dicts, JSON-serialisable (persisted)
        self.floors = {}  # job id -> lowest generation allowed to run (fence)
        self.children = {}  # key -> Popen, only for jobs this agent started
        self.emulated_speed = None
        self.emulated_threads = None  # OMP_NUM_THREADS for jobs on emulated GPUs, unless set
        self.notes = []
        self.save_problem = None  # why the job table could not be saved, while it cannot
        makedirs_private(os.path.join(workdir, "logs"))
        makedirs_private(os.path.join(workdir, "exits"))

    # ---- persistence and adoption
    def adopt(self):
        jobs, floors, note = self.state.load()
        if note:
            self.notes.append(note)
        self.floors = floors
        for job in jobs:
            job.setdefault("reported", True)
            if job.get("state") != "exited":
                job["adopted"] = True
                size = self._log_size(job)
                job["offset"] = size
                last = self._last_progress(job)
                if last is not None:
                    job["progress"] = last
            self.jobs.append(job)
        self.poll()
        self._save()
        return [self.summary(j) for j in self.jobs]

    def _save(self):
        """Save the job table; when the workdir's disk is full (or over quota) keep it in memory,
        say why (``save_problem``, sent with every heartbeat) and try again at every poll. The
        agent used to die here, leaving its jobs running unwatched, and every agent started
        after it failed its hello: the host was lost until someone freed space."""
        self._forget_old_exits()
        try:
            self.state.save(self.jobs, self.floors)
        except OSError as exc:
            if self.save_problem is None:
                sys.stderr.write("heet-agent: cannot save the job table: %s\n" % exc)
            self.save_problem = "cannot save its job table in %s: %s" % (self.workdir, exc.strerror or exc)
            return
        self.save_problem = None

    def _forget_old_exits(self):
        """Keep the latest KEEP_FINISHED reported exits, with their log and exit files.

        A lab's agent launches thousands of runs; each left its record in memory and a log
        and an exit file on disk for good. A run's log is read while it runs and just after;
        once its exit is reported and a hundred later runs have ended, it goes.
        """
        ended = [j for j in self.jobs if j["state"] == "exited" and j.get("reported")]
        for job in ended[:max(0, len(ended) - KEEP_FINISHED)]:
            self.jobs.remove(job)
            for key, folder in (("log", "logs"), ("exit_file", "exits")):
                path = job.get(key)
                own = os.path.join(os.path.realpath(self.workdir), folder)
                if path and os.path.dirname(os.path.realpath(path)) == own:  # never a path the controller chose
                    remove_log(path)

    def _log_size(self, job):
        try:
            return os.path.getsize(job["log"])
        except OSError:
            return 0

    def _last_progress(self, job):
        for line in reversed(read_tail(job["log"], 200)):
            parsed = parse_progress_line(line)
            if parsed is not None:
                return parsed
        return None

    # ---- requests
    def launch(self, args):
        job_id = _check_job_id(args)
        generation = _check_int(args, "generation")
        argv = args.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise JobError("argv must be a non-empty list of strings")
        env_extra = args.get("env") or {}
        if not isinstance(env_extra, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_extra.items()
        ):
            raise JobError("env must be an object of strings")
        gpus = _check_int_list(args, "gpus", [])
        log_max = args.get("log_max_bytes")
        log_max = ROTATE_BYTES if log_max is None else _check_int(args, "log_max_bytes", MIN_ROTATE_BYTES)
        visible = _check_int_list(args, "visible", gpus)
        if not set(gpus) <= set(visible):
            raise JobError("visible must include every one of gpus")
        floor = self.floors.get(job_id, 0)
        if generation < floor:
            raise JobError("job %s generation %d is fenced (generations below %d may not run)"
                           % (job_id, generation, floor))
        for job in self.jobs:
            if job["job_id"] == job_id and job["state"] == "stopping" and job["generation"] < generation:
                raise JobError("job %s generation %d %s; try again once it has exited"
                               % (job_id, job["generation"], STILL_STOPPING))
            if job["job_id"] == job_id and job["state"] != "exited":
                raise JobError("job %s generation %d is still running here; fence or stop it first"
                               % (job_id, job["generation"]))
        # saved first, always: a disk that filled while the host was idle failed the launch part-way, as an
        # "internal error", and nothing said the host could launch nothing (save_problem goes with heartbeats)
        self._save()
        if self.save_problem is not None:  # a run it cannot record would be unknown to the next agent
            raise JobError("not launched: the agent %s" % self.save_problem)
        workdir = args.get("workdir") or self.workdir
        workdir = os.path.expanduser(str(workdir))
        if not os.path.isdir(workdir):
            raise JobError(f"workdir {workdir} does not exist")
        env = job_environment(os.environ, env_extra, job_id, generation, gpus, visible, self.emulated_speed,
                              self.emulated_threads)
        import shutil

        if argv[0].startswith("~/"):  # a hosts file's python = "~/miniconda3/bin/python"
            argv = [os.path.expanduser(argv[0])] + list(argv[1:])
        exe = argv[0]
        if os.sep not in exe and shutil.which(exe, path=env.get("PATH")) is None:
            raise JobError(f"command not found: {exe}")
        resolve_checkpoint_dir(env, workdir)
        scratch = make_scratch_dir(env)
        try:
            claim_checkpoint_dir(env)
            return self._start(job_id, generation, argv, env, workdir, gpus, args.get("log"), scratch, log_max)
        except BaseException:
            remove_scratch_dir(scratch)
            raise

    def _start(self, job_id, generation, argv, env, workdir, gpus, log, scratch, log_max):
        import subprocess

        log = log or os.path.join(self.workdir, "logs", "%s-g%d.log" % (job_id, generation))
        log = os.path.expanduser(str(log))
        if not os.path.isabs(log):
            log = os.path.join(workdir, log)
        exit_file = os.path.join(self.workdir, "exits", "%s-g%d.json" % (job_id, generation))
        try:
            os.remove(exit_file)
        except OSError:
            pass
        try:
            makedirs_private(os.path.dirname(log))
            logfh = open_private(log, "ab")
        except OSError as exc:
            raise JobError(f"cannot open log file {log}: {exc}")
        offset = logfh.tell()
        with logfh:
            try:
                child = subprocess.Popen(
                    [sys.executable] + self.self_argv + ["--wrap-job", exit_file, "--"] + argv,
                    cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=logfh, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True,
                )
            except OSError as exc:
                raise JobError(f"cannot start job: {exc}")
        job = {
            "job_id": job_id, "generation": generation, "pid": child.pid, "pgid": child.pid,
            "start_time": proc_start_time(child.pid), "argv": argv, "workdir": workdir, "gpus": gpus,
            "log": log, "log_max": log_max, "exit_file": exit_file, "offset": offset, "started_at": time.time(),
            "state": "running", "exit_code": None, "signal": None, "reason": None, "kill_at": None,
            "adopted": False, "reported": False, "progress": None, "scratch": scratch,
        }
        self.jobs.append(job)
        self.children[_key(job)] = child
        self._save()
        return self.summary(job)

    def _find(self, job_id, generation=None):
        found = [j for j in self.jobs if j["job_id"] == job_id
                 and (generation is None or j["generation"] == generation)]
        running = [j for j in found if j["state"] != "exited"]
        return running[-1] if running else (found[-1] if found else None)

    def _terminate(self, job, grace_s, reason):
        if job["state"] != "running":
            return
        job["state"] = "stopping"
        job["reason"] = reason
        job["kill_at"] = time.time() + grace_s
        if not pid_alive(job["pid"], job.get("start_time")):
            return  # ended (its pid may be another process's by now): the next poll records the exit
        try:
            os.killpg(job["pgid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            raise JobError("cannot signal job {}: {}".format(job["job_id"], exc))

    def stop(self, args):
        job_id = _check_job_id(args)
        grace = float(args.get("grace_s", 10.0))
        generation = args.get("generation")
        job = self._find(job_id, generation if isinstance(generation, int) else None)
        if job is None:
            raise JobError(f"no job {job_id} on this host")
        self._terminate(job, max(0.0, grace), "stopped")
        self._save()
        return self.summary(job)

    def fence(self, args):
        job_id = _check_job_id(args)
        floor = _check_int(args, "min_generation")
        grace = float(args.get("grace_s", 10.0))
        self.floors[job_id] = max(floor, self.floors.get(job_id, 0))
        fenced = []
        for job in self.jobs:
            if job["job_id"] == job_id and job["generation"] < floor and job["state"] == "running":
                self._terminate(job, max(0.0, grace), "fenced")
                fenced.append(self.summary(job))
        self._save()
        return {"fenced": fenced, "min_generation": self.floors[job_id]}

    def log_tail(self, args):
        job_id = _check_job_id(args)
        lines = args.get("lines", 50)
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            raise JobError("lines must be a non-negative integer")
        generation = args.get("generation")
        job = self._find(job_id, generation if isinstance(generation, int) else None)
        if job is None:
            raise JobError(f"no job {job_id} on this host")
        return {"job_id": job_id, "generation": job["generation"], "log": job["log"],
                "lines": read_tail(job["log"], min(lines, MAX_TAIL_LINES))}

    # ---- periodic work
    def poll(self):
        """Reap exits, escalate overdue stops to SIGKILL, forward new progress lines."""
        changed = False
        now = time.time()
        for job in self.jobs:
            if job["state"] == "exited":
                continue
            self._forward_progress(job)
            if self._check_exit(job):
                changed = True
                continue
            if job["state"] == "stopping" and job["kill_at"] is not None and now >= job["kill_at"]:
                try:
                    os.killpg(job["pgid"], signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                job["kill_at"] = None
                job["killed"] = True
        for job in self.jobs:
            if job["state"] == "exited" and not job.get("reported"):
                job["reported"] = True
                changed = True
                self.send_event("job_exit", **self.summary(job))
        if changed or self.save_problem is not None:
            self._save()

    def _check_exit(self, job):
        child = self.children.get(_key(job))
        wrapper_code = None  # jobwrap's own exit code: the job's, or 128 + its signal
        if child is not None:
            if child.poll() is None:
                return False
            wrapper_code = child.returncode
            del self.children[_key(job)]
        elif pid_alive(job["pid"], job.get("start_time")):
            return False
        self._forward_progress(job)
        status = None
        try:
            with open(job["exit_file"]) as fh:
                status = json.load(fh)
        except (OSError, ValueError):
            pass
        if isinstance(status, dict):
            job["exit_code"] = status.get("exit_code")
            job["signal"] = status.get("signal")
            if status.get("error"):
                job["reason"] = "failed to start: {}".format(status["error"])
        elif job.get("killed"):
            job["signal"] = int(signal.SIGKILL)
        elif wrapper_code is not None and wrapper_code >= 0:  # the exit file could not be written (full disk)
            job["exit_code"], job["signal"] = (wrapper_code, None) if wrapper_code < 128 else (None, wrapper_code - 128)
        else:
            job["reason"] = job.get("reason") or "lost (no exit status recorded)"
        job["state"] = "exited"
        job["ended_at"], job["reaped_at"] = _when_ended(status), time.time()
        remove_scratch_dir(job.pop("scratch", None))
        if left_in_group(job["pgid"], job.get("start_time")):
            # children that ignored the stop (or outlived the job) keep its GPUs, which then show as free
            try:
                os.killpg(job["pgid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return True

    def _forward_progress(self, job):
        follow_log(job, self.send_event)

    def summary(self, job):
        return {
            "job_id": job["job_id"], "generation": job["generation"], "state": job["state"],
            "pid": job["pid"], "gpus": job.get("gpus", []), "log": job["log"],
            "exit_code": job.get("exit_code"), "signal": job.get("signal"), "reason": job.get("reason"),
            "adopted": bool(job.get("adopted")), "started_at": job.get("started_at"),
            "progress": job.get("progress"),
            # how long ago, not when: the controller's clock need not agree with this host's
            "ended_ago_s": max(0.0, time.time() - job["ended_at"]) if job.get("ended_at") else None,
        }

    def recent_summaries(self, window_s=30.0):
        """Live jobs and those that ended in the last ``window_s``: what a heartbeat carries."""
        cutoff = time.time() - window_s
        return [self.summary(j) for j in self.jobs
                if j["state"] != "exited" or j.get("reaped_at", j.get("ended_at", 0)) >= cutoff]

    def summaries(self):
        return [self.summary(j) for j in self.jobs]


def _when_ended(status):
    """The time the wrapper wrote, for an exit no agent saw (the agent had gone with its link):
    else the first poll that finds it, which may be hours on."""
    now = time.time()
    ended = status.get("ended_at") if isinstance(status, dict) else None
    if isinstance(ended, (int, float)) and not isinstance(ended, bool) and 0 < ended <= now:
        return float(ended)
    return now
