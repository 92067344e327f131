"""The agent's main loop: read requests on stdin, answer on stdout, heartbeat, watch jobs.

Runs for as long as its controller's channel is open. On stdin EOF (the SSH link went away)
it exits and leaves jobs running; the next agent re-adopts them from the state file. It
never listens on a port and never writes anything but protocol lines to stdout.
"""

import importlib.util
import os
import select
import signal
import sys
import time

from heet_agent import inventory
from heet_agent.gpu_sampler import GpuSampler
from heet_agent.gpu_users import mark_others
from heet_agent.checkpoint_dirs import makedirs_private
from heet_agent.jobs import JobError, JobTable
from heet_agent.agent_log import open_agent_log
from heet_agent.takeover import SessionMark, served_by_another, take_over
from heet_agent.protocol import (
    AGENT_VERSION,
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    decode_line,
    encode,
    error_reply,
    event,
    message_kind,
    reply,
)

POLL_S = 0.25
JOB_OPS = frozenset({"launch", "stop", "fence", "log_tail", "jobs"})


class Agent:
    def __init__(self, workdir, self_argv, check_only=False):
        self.workdir = workdir
        self.check_only = check_only
        self.lock = None  # the workdir's agent lock, taken at hello (not by a check-only agent)
        self.session_mark = None  # says when this controller last spoke (takeover.py), once hello took the lock
        self.out_fd = os.dup(1)
        self.jobs = JobTable(workdir, self_argv, self.send_event)
        self.heartbeat_s = 3.0
        self.sampler = None  # reads the GPUs beside the loop (gpu_sampler.py), once hello found some
        self.read_limit_s = None  # hello's limit on one reading; None before hello
        self.next_heartbeat = None
        self.seq = 0
        self.source, self.gpus = "none", []
        self.emulate, self.probes = None, ("nvml", "nvidia-smi")  # hello sets both
        self.probe_limit_s = inventory.PROBE_LIMIT_S
        self.running = True
        self.finishing = False  # serving is over; stops already begun are being seen through

    def send(self, message):
        if not self.running and self.finishing:  # the controller is gone: nobody reads them
            return
        data = memoryview(encode(message))
        try:
            while data:
                try:
                    written = os.write(self.out_fd, data)
                except BlockingIOError:  # stdout shares a non-blocking file with stdin (a socket)
                    select.select([], [self.out_fd], [], 1.0)
                    continue
                data = data[written:]
        except OSError:  # broken pipe: the controller is gone
            self.running = False

    def send_event(self, name, **fields):
        self.send(event(name, **fields))

    # ---- requests
    def handle(self, message):
        if self.session_mark is not None:
            self.session_mark.spoken()
        request_id = message.get("id")
        op = message.get("op")
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            self.send_event("protocol_error", error=f"request without an integer id: op {op!r}")
            return
        handler = getattr(self, "op_" + str(op).replace("-", "_"), None)
        if handler is None:
            self.send(error_reply(request_id, f"unknown op {op!r}"))
            return
        if self.lock is None and str(op).replace("-", "_") in JOB_OPS:  # a check-only agent never holds it
            why = ("this agent only checks the host (--check-only); the controller's agent runs the jobs"
                   if self.check_only else "send hello first")
            self.send(error_reply(request_id, f"{op}: {why}"))
            return
        try:
            result = handler(message.get("args") or {})
        except JobError as exc:
            self.send(error_reply(request_id, exc))
            return
        except Exception as exc:  # report, keep serving: one bad request must not kill the agent
            sys.stderr.write(f"heet-agent: op {op} failed: {exc!r}\n")
            self.send(error_reply(request_id, f"internal error in {op}: {exc}"))
            return
        self.send(reply(request_id, result))

    def op_hello(self, args):
        version = args.get("protocol")
        if version != PROTOCOL_VERSION:
            raise JobError("protocol mismatch: controller speaks %r, agent speaks %d" % (version, PROTOCOL_VERSION))
        emulate = args.get("emulate")
        if emulate is not None:
            if not isinstance(emulate, dict) or not isinstance(emulate.get("gpu_type"), str) \
                    or not isinstance(emulate.get("count"), int) or not isinstance(emulate.get("speed"), (int, float)):
                raise JobError("emulate must be {gpu_type: str, count: int, speed: number}")
        self.jobs.emulated_speed = float(emulate["speed"]) if emulate is not None else None
        # one thread a rank: its step is its CPU time / speed, and a second thread's CPU time
        # spinning at each sync counted too (20% slower idle, 3-5x on a busy host: a V100 at 0.6
        # measured slower than a T4 at 0.3); a thread per core in every rank oversubscribed them
        self.jobs.emulated_threads = 1 if emulate is not None else None
        self.emulate = emulate
        heartbeat = args.get("heartbeat_s", 3.0)
        if isinstance(heartbeat, (int, float)) and not isinstance(heartbeat, bool) and heartbeat > 0:
            self.heartbeat_s = float(heartbeat)
        probes = args.get("probes", ["nvml", "nvidia-smi"])
        self.probes = tuple(p for p in probes if isinstance(p, str)) if isinstance(probes, list) else ()
        owner, session, previous = (args.get(k) or "" for k in ("owner", "session", "previous_session"))
        if not all(isinstance(v, str) for v in (owner, session, previous)):
            raise JobError("owner, session and previous_session must be strings")
        if not self.check_only and self.lock is None:
            # refuses when another controller's agent serves here
            self.lock = take_over(self.workdir, owner, session, previous)
            self.session_mark = SessionMark(self.workdir)
        self.probe_limit_s = _positive(args.get("probe_limit_s"), inventory.PROBE_LIMIT_S)
        try:
            inv = self.op_inventory({})
        except inventory.ProbeTimeout as exc:  # unknown is not empty: fail, and be tried again
            raise JobError("GPUs not read: %s; jobs here keep running, and the connect is tried again" % exc) \
                from None
        if self.check_only and (held := served_by_another(self.workdir, owner)) is not None:
            inv["warnings"].append(held)
        if importlib.util.find_spec("torch") is None:  # hosts check read "ready"; every job there then failed
            inv["warnings"].append("its python (%s) cannot import torch: a job's python3 runs with it, so "
                                   "training fails here (python = in the hosts file names one that can)"
                                   % sys.executable)
        jobs = [] if self.check_only else self.jobs.adopt()
        if not self.check_only:  # a check-only agent has not read the job table: it cannot tell whose
            mark_others(inv["gpus"], self.jobs.jobs)
        self.read_limit_s = _positive(args.get("gpu_read_limit_s"), inventory.SAMPLE_LIMIT_S)
        self._start_sampler()
        self.next_heartbeat = time.time() + self.heartbeat_s
        return {"protocol": PROTOCOL_VERSION, "agent_version": AGENT_VERSION, "pid": os.getpid(),
                "inventory": inv, "jobs": jobs, "notes": self.jobs.notes, "workdir_problem": self.jobs.save_problem}

    def _start_sampler(self):
        read = inventory.reader(self.source, self.read_limit_s)
        if read is not None and self.sampler is None and not self.check_only:
            self.sampler = GpuSampler(read, self.heartbeat_s, self.source)
            self.sampler.start()

    def op_inventory(self, args):
        self.source, self.gpus, notes = inventory.probe_gpus(self.emulate, self.probes, self.probe_limit_s)
        if self.read_limit_s is not None:  # asked again after hello (c on a host whose GPUs were not read):
            self._start_sampler()  # a source found now gets its readings too
        warnings = [n for n in notes if n.endswith(inventory.SHADOWED)]
        return {"source": self.source, "gpus": self.gpus, "notes": notes, "warnings": warnings,
                "facts": inventory.host_facts()}

    def op_ping(self, args):
        return {"time": time.time()}

    def op_launch(self, args):
        return self.jobs.launch(args)

    def op_stop(self, args):
        return self.jobs.stop(args)

    def op_fence(self, args):
        return self.jobs.fence(args)

    def op_log_tail(self, args):
        return self.jobs.log_tail(args)

    def op_jobs(self, args):
        return {"jobs": self.jobs.summaries()}

    def op_shutdown(self, args):
        self.running = False
        return {"jobs_left_running": len([j for j in self.jobs.jobs if j["state"] != "exited"])}

    # ---- loop
    def heartbeat(self):
        self.seq += 1
        fresh, problem = self.sampler.sample() if self.sampler is not None else (None, None)
        sample, changed = inventory.utilization(fresh, self.gpus)
        gpus = mark_others(sample, self.jobs.jobs)
        self.send_event("heartbeat", seq=self.seq, time=time.time(), gpus=gpus, jobs=self.jobs.recent_summaries(),
                        gpu_probe=problem or changed or None, gpus_changed=bool(changed),
                        workdir_problem=self.jobs.save_problem)

    def serve(self):
        self.send_event("agent_start", protocol=PROTOCOL_VERSION, agent_version=AGENT_VERSION, pid=os.getpid())
        # select(), not epoll: epoll refuses files and /dev/null as stdin. Plain select.select
        # (not the selectors module) keeps an import off every agent start.
        os.set_blocking(0, False)
        buffer = b""
        while self.running:
            for _fd in select.select([0], [], [], POLL_S)[0]:
                try:
                    data = os.read(0, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    self.running = False  # EOF: the controller went away; jobs keep running
                    break
                buffer += data
                while b"\n" in buffer and self.running:
                    line, buffer = buffer.split(b"\n", 1)
                    self.dispatch(line)
                if len(buffer) > MAX_LINE_BYTES:
                    self.send_event("protocol_error", error="request line too long; dropped")
                    buffer = b""
            self.jobs.poll()
            if self.next_heartbeat is not None and time.time() >= self.next_heartbeat:
                self.heartbeat()
                self.next_heartbeat = time.time() + self.heartbeat_s

    def finish_stops(self):
        """The controller went away while jobs were stopping: the SIGKILL at the end of their stop
        grace is this agent's to send (the job's wrapper only waits). Exiting at once, a job that
        ignored SIGTERM ran on, holding its GPU, until a controller came back. Bounded by the
        stop graces; a new agent taking over ends this one (SIGTERM) and carries the stops on."""
        self.finishing, said = True, False
        while any(j["state"] == "stopping" and j.get("kill_at") is not None for j in self.jobs.jobs):
            if not said:
                sys.stderr.write("heet-agent: the controller is gone; finishing the stops begun\n")
                said = True
            time.sleep(POLL_S)
            self.jobs.poll()

    def dispatch(self, line):
        if not line.strip():
            return
        message, problem = decode_line(line)
        if message is None or message_kind(message) != "request":
            self.send_event("protocol_error", error=problem or "expected a request")
            return
        self.handle(message)


def _positive(value, default):
    """A hello's number of seconds, when it is one; else the agent's own default."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else default


def _valid_host_name(name):
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    return 0 < len(name) <= 128 and name[0] not in ".-" and set(name) <= allowed


def _self_argv():
    """How to start this agent again (for job wrappers): the .pyz path, the unpacked agent's
    entry next to it, or ``-m heet_agent``."""
    path = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    unpacked = path.endswith(".d" + os.sep + "__main__.py") and os.path.basename(os.path.dirname(path))
    if (path.endswith(".pyz") or (unpacked and unpacked.startswith("heet-agent-"))) and os.path.isfile(path):
        return [path]
    return ["-m", "heet_agent"]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 3 and argv[0] == "--wrap-job" and argv[2] == "--":
        from heet_agent.jobwrap import run as run_wrapped

        return run_wrapped(argv[1], argv[3:])
    if len(argv) in (4, 5) and argv[0] == "--workdir" and argv[2] == "--host" and argv[4:] in ([], ["--check-only"]):
        # how the controller starts it, without argparse's import cost
        workdir_arg, host, check_only = argv[1], argv[3], len(argv) == 5
    else:
        import argparse

        parser = argparse.ArgumentParser(prog="heet-agent")
        parser.add_argument("--workdir", default=".")
        parser.add_argument("--host", default="", help="the hosts-file name this agent serves")
        parser.add_argument("--check-only", action="store_true",
                            help="report the host, leave the running agent and its jobs alone")
        parser.add_argument("--version", action="version",
                            version="heet-agent %s (protocol %d)" % (AGENT_VERSION, PROTOCOL_VERSION))
        options = parser.parse_args(argv)
        workdir_arg, host, check_only = options.workdir, options.host, options.check_only
    workdir = os.path.abspath(os.path.expanduser(workdir_arg))
    if host:
        # One machine can be several hosts-file entries (a mixed box split by GPU type, or the
        # bundled local config): each gets its own state, lock and logs under the shared workdir.
        if not _valid_host_name(host):
            sys.stderr.write("heet-agent: invalid host name %r\n" % host)
            return 2
        workdir = os.path.join(workdir, "hosts", host)
    makedirs_private(workdir)
    # state, logs and the lock are the user's alone: the work dirs are private, whatever the
    # umask (the jobs' own files keep the user's umask; the agent does not change it)
    for private in {workdir, os.path.abspath(os.path.expanduser(workdir_arg))}:
        try:
            os.chmod(private, 0o700)
        except OSError as exc:
            sys.stderr.write("heet-agent: cannot make %s private: %s\n" % (private, exc))
    open_agent_log(workdir)  # stderr never reaches the protocol stream
    sys.stderr.write("heet-agent %s pid %d starting in %s\n" % (AGENT_VERSION, os.getpid(), workdir))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # exit; jobs keep running
    # The lock is taken at hello, which names the controller: a check (heet-tui hosts check)
    # takes none, so it never replaces the controller's agent and cuts it off its jobs.
    agent = Agent(workdir, _self_argv(), check_only)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # stray prints from libraries cannot corrupt the protocol (agent.out is a dup)
    try:
        agent.serve()
        agent.finish_stops()
    except SystemExit:
        pass
    sys.stderr.write("heet-agent pid %d exiting\n" % os.getpid())
    return 0
