"""The GPUs' utilization and processes, read in a thread of their own.

nvidia-smi and NVML hang when a GPU falls off the bus (Xid 79): nvidia-smi sits in the kernel
where SIGKILL cannot reach it. Read from the agent's main loop, that stopped its heartbeats and
requests too, so the controller saw a silent host and lost it, and its jobs with it, while they
might still run. Here the reading runs beside the loop; a heartbeat carries the latest reading
that is recent enough, and says when there is none and why ("nvidia-smi has not answered for
40 s"), which is worth telling a user: it is how a dying GPU first shows.
"""

import threading
import time

from heet_agent.inventory import BUS_HINT

STUCK_S = 10.0  # a reading in flight this long is reported as stuck
FRESH_PERIODS = 3  # a reading older than this many periods is not sent as current


class GpuSampler:
    def __init__(self, read, period_s, what, stuck_s=STUCK_S):
        self._read = read  # () -> list of GPU dicts; raises when it cannot read
        self.period_s = period_s
        self.what = what  # "nvidia-smi" or "nvml", as the user knows it
        self.stuck_s = stuck_s
        self._lock = threading.Lock()
        self._latest = None  # (time read, gpus)
        self._error = None
        self._busy_since = None
        self._thread = None

    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)
            self._thread.start()

    def _loop(self):
        while True:
            began = time.time()
            with self._lock:
                self._busy_since = began
            try:
                gpus, error = self._read(), None
            except Exception as exc:
                gpus, error = None, str(exc) or type(exc).__name__
            with self._lock:
                self._busy_since = None
                self._error = error
                if gpus is not None:
                    self._latest = (time.time(), gpus)
            time.sleep(max(0.05, self.period_s - (time.time() - began)))

    def sample(self):
        """``(gpus or None, problem or None)``: the latest reading if recent, and what is wrong."""
        now = time.time()
        with self._lock:
            latest, error, busy = self._latest, self._error, self._busy_since
        problem = None
        if busy is not None and now - busy > self.stuck_s:
            problem = "%s has not answered for %.0f s (%s)" % (self.what, now - busy, BUS_HINT)
        elif error is not None:
            problem = "%s: %s" % (self.what, error[:200])
        if latest is None or now - latest[0] > FRESH_PERIODS * self.period_s + self.stuck_s:
            return None, problem
        return latest[1], problem
